// SPDX-License-Identifier: BSD-3-Clause

// The peers worker (../shared/peers/SCENARIOS.md, "Worker contract") for
// etcd's own Go lock, concurrency.Mutex on a concurrency.Session, so that
// bench/etcd-vs-redis.py can run S1 and S3 with it beside dlock's etcd
// backend in one run (issue 38). Built in GOPATH mode against Debian's
// golang-etcd-server-dev (etcd 3.4's clientv3):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o W bench/go/etcd_mutex_worker.go
//
//	W mode=cycle|contend url=etcd://H:P key=K start=EPOCH ttl_ms=10000
//	  [warmup=0.5 duration=5] [target=2000 max_time=30 ctr=F holder=F retry=...]
//	  lat=F out=F
//
// One client, one session (its lease's TTL ttl_ms in whole seconds, kept
// alive by the session's own goroutine) and one Mutex per process, reused
// for every cycle: a cycle is Lock (the create-if-absent transaction, then
// a read for keys before ours) and Unlock (a delete). retry= is accepted
// and ignored: Mutex waits on a watch, it has no retry settings.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

type result struct {
	N       int      `json:"n"`
	Elapsed float64  `json:"elapsed_s"`
	AcqFail int      `json:"acq_fail"`
	Giveups int      `json:"giveups"`
	RelFail int      `json:"rel_fail"`
	Errors  int      `json:"errors"`
	Viol    int      `json:"viol"`
	TTarget *float64 `json:"t_target"`
	TEnd    float64  `json:"t_end"`
	Late    bool     `json:"late"`
}

func wall() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "etcd-go-worker: "+format+"\n", a...)
	os.Exit(2)
}

func num(args map[string]string, k, def string) float64 {
	v, ok := args[k]
	if !ok {
		v = def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		die("%s=%s: not a number", k, v)
	}
	return f
}

// The shared 16-byte decimal counter (pread, +1, pwrite), as every peer does it.
func ctrIncrement(fd int) int {
	buf := make([]byte, 16)
	if _, err := syscall.Pread(fd, buf, 0); err != nil {
		die("ctr: %v", err)
	}
	c, err := strconv.Atoi(strings.TrimSpace(string(buf)))
	if err != nil {
		die("ctr: %v", err)
	}
	c++
	if _, err := syscall.Pwrite(fd, []byte(fmt.Sprintf("%-15d\n", c)), 0); err != nil {
		die("ctr: %v", err)
	}
	return c
}

func main() {
	args := map[string]string{}
	for _, a := range os.Args[1:] {
		if i := strings.IndexByte(a, '='); i > 0 {
			args[a[:i]] = a[i+1:]
		}
	}
	url := args["url"]
	if !strings.HasPrefix(url, "etcd://") {
		die("url=%s: expected etcd://host:port[,host:port]", url)
	}
	endpoints := strings.Split(strings.TrimPrefix(url, "etcd://"), ",")
	key := args["key"]
	mode := args["mode"]
	start := num(args, "start", "0")
	ttlS := int((int64(num(args, "ttl_ms", "10000")) + 999) / 1000)

	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		die("client: %v", err)
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlS))
	if err != nil {
		die("session: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	m := concurrency.NewMutex(s, key)
	// prime: one cycle on a private name (connection, session)
	pm := concurrency.NewMutex(s, fmt.Sprintf("%s:prime:%d", key, os.Getpid()))
	if pm.Lock(ctx) == nil {
		_ = pm.Unlock(ctx)
	}

	res := result{}
	var lat []int64
	res.Late = wall() > start
	if d := start - wall(); d > 0 {
		time.Sleep(time.Duration(d * 1e9))
	}
	if mode == "cycle" {
		warmup, duration := num(args, "warmup", "0.5"), num(args, "duration", "5")
		for wall() < start+warmup {
			if m.Lock(ctx) == nil {
				_ = m.Unlock(ctx)
			}
		}
		t0 := time.Now()
		for time.Since(t0) < time.Duration(duration*1e9) {
			ta := time.Now()
			if err := m.Lock(ctx); err != nil {
				res.AcqFail++
				res.Errors++
				continue
			}
			dt := time.Since(ta)
			if err := m.Unlock(ctx); err != nil {
				res.RelFail++
			}
			lat = append(lat, dt.Nanoseconds())
			res.N++
		}
		res.Elapsed = time.Since(t0).Seconds()
	} else {
		target := int(num(args, "target", "2000"))
		maxTime := num(args, "max_time", "30")
		cfd, err := syscall.Open(args["ctr"], syscall.O_RDWR, 0)
		if err != nil {
			die("ctr: %v", err)
		}
		holder := args["holder"]
		for wall() < start+maxTime {
			ta := time.Now()
			for m.Lock(ctx) != nil {
				res.Giveups++
				res.Errors++
			}
			dt := time.Since(ta)
			own := true
			if f, err := os.OpenFile(holder, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644); err != nil {
				res.Viol++
				own = false
			} else {
				f.Close()
			}
			c := ctrIncrement(cfd)
			if c == target {
				t := wall()
				res.TTarget = &t
			}
			if own {
				os.Remove(holder)
			}
			if err := m.Unlock(ctx); err != nil {
				res.RelFail++
			}
			lat = append(lat, dt.Nanoseconds())
			res.N++
			if c >= target {
				break
			}
		}
		syscall.Close(cfd)
		res.Elapsed = wall() - start
	}
	res.TEnd = wall()
	var b strings.Builder
	for _, x := range lat {
		fmt.Fprintf(&b, "%d\n", x)
	}
	if p := args["lat"]; p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0644); err != nil {
			die("lat: %v", err)
		}
	}
	out, _ := json.Marshal(res)
	if err := os.WriteFile(args["out"], append(out, '\n'), 0644); err != nil {
		die("out: %v", err)
	}
}
