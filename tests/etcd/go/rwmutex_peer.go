// SPDX-License-Identifier: BSD-3-Clause

// A peer for tests/etcd/test_etcd_rw.c: etcd's own recipe RWMutex
// (go.etcd.io/etcd/contrib/recipes, rwmutex.go) on a concurrency.Session,
// so that the test can show dlock's readers and writers on etcd and the
// recipe's exclude each other both ways. Built by the test in GOPATH mode
// against Debian's golang-etcd-server-dev (etcd 3.4's clientv3):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o P tests/etcd/go/rwmutex_peer.go
//
//	P HOST:PORT NAME read|write HOLD_MS
//
// It takes NAME's read (RLock) or write (Lock) side, prints "held KEY"
// once it has it, holds it HOLD_MS, prints "done", unlocks and exits 0.
// SIGTERM at any time closes the session (its lease's revoke deletes its
// key, held or waiting) and exits 0. The session's TTL is 5 s.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	recipe "go.etcd.io/etcd/contrib/recipes"
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "rwmutex_peer: "+format+"\n", a...)
	os.Exit(2)
}

func main() {
	if len(os.Args) != 5 || (os.Args[3] != "read" && os.Args[3] != "write") {
		die("usage: rwmutex_peer HOST:PORT NAME read|write HOLD_MS")
	}
	holdMs, err := strconv.Atoi(os.Args[4])
	if err != nil {
		die("HOLD_MS: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]},
		DialTimeout: 5 * time.Second})
	if err != nil {
		die("client: %v", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		die("session: %v", err)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		s.Close() // revokes the lease: our key goes, held or waiting
		os.Exit(0)
	}()
	m := recipe.NewRWMutex(s, os.Args[2])
	var key string
	if os.Args[3] == "read" {
		err = m.RLock()
	} else {
		err = m.Lock()
	}
	if err != nil {
		die("lock: %v", err)
	}
	// The recipe keeps its key private: ours is the one key on our lease.
	if ttl, err := cli.TimeToLive(cli.Ctx(), s.Lease(), clientv3.WithAttachedKeys()); err == nil &&
		len(ttl.Keys) == 1 {
		key = string(ttl.Keys[0])
	}
	fmt.Printf("held %s\n", key)
	time.Sleep(time.Duration(holdMs) * time.Millisecond)
	fmt.Println("done")
	if os.Args[3] == "read" {
		err = m.RUnlock()
	} else {
		err = m.Unlock()
	}
	if err != nil {
		die("unlock: %v", err)
	}
	s.Close()
}
