# SPDX-License-Identifier: BSD-3-Clause
# bash completion for dlock(1). Installed as
# share/bash-completion/completions/dlock; bash-completion loads it on demand.

_dlock()
{
    local cur prev words cword i cmd=
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}

    local global_opts="-r --redis --connect-timeout --io-timeout --min-node-uptime
        --user -a --pass --password-file --no-auth-warning --prefix -q --quiet
        -v --verbose -h --help -V --version
        --tls --cacert --cacertdir --cert --key --sni --insecure
        --min-replicas --min-replicas-timeout --cluster"
    local lock_opts="-t --ttl -w --wait --timeout -n --nonblock -E --conflict-exit-code
        --fair --fence --no-fence -q --quiet -v --verbose -h --help"

    # The command is the first word after the global options and their values.
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -r | --redis | --connect-timeout | --io-timeout | --min-node-uptime | \
            --user | -a | --pass | --password-file | --prefix | \
            --cacert | --cacertdir | --cert | --key | --sni | \
            --min-replicas | --min-replicas-timeout)
            ((i++)) ;;
        -*) ;;
        *)
            cmd=${COMP_WORDS[i]}
            break
            ;;
        esac
    done

    # `run NAME -- PROGRAM ...`: after "--", complete the program and its
    # arguments as bash would.
    if [ "$cmd" = run ] || [ "$cmd" = elect ]; then
        local j
        for ((j = i + 1; j < COMP_CWORD; j++)); do
            if [ "${COMP_WORDS[j]}" = -- ]; then
                if declare -F _command_offset >/dev/null; then
                    _command_offset $((j + 1))
                else
                    mapfile -t COMPREPLY < <(compgen -c -- "$cur")
                fi
                return 0
            fi
        done
    fi

    case $prev in
    --password-file | --cacert | --cert | --key)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return 0
        ;;
    --cacertdir)
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        return 0
        ;;
    -r | --redis)
        mapfile -t COMPREPLY < <(compgen -W "redis:// rediss:// unix:// redis-sentinel:// etcd://" -- "$cur")
        compopt -o nospace 2>/dev/null
        return 0
        ;;
    --on-lost)
        mapfile -t COMPREPLY < <(compgen -W "term kill ignore" -- "$cur")
        return 0
        ;;
    -t | --ttl | -w | --wait | --timeout | --grace | --connect-timeout | --io-timeout | \
        --min-node-uptime | -E | --conflict-exit-code | --user | -a | --pass | \
        --prefix | -c | --command | --sni | --min-replicas | --min-replicas-timeout | \
        --permits | --value | --lock-delay)
        return 0 # a value of the user's own
        ;;
    esac

    local opts
    case $cmd in
    "") opts="$global_opts run acquire release extend status list break doctor elect leader" ;;
    run) opts="$lock_opts -s --shared -x -e --exclusive --permits -c --command --on-lost --grace --" ;;
    acquire) opts="$lock_opts --print-fence" ;;
    elect) opts="-t --ttl -w --wait --timeout -n --nonblock -E --conflict-exit-code --value
        --again --lock-delay -c --command --on-lost --grace -q --quiet -v --verbose -h --help --" ;;
    leader) opts="--watch --json -v --verbose -h --help" ;;
    release) opts="-v --verbose -h --help" ;;
    extend) opts="-t --ttl -v --verbose -h --help" ;;
    status) opts="--json -v --verbose -h --help" ;;
    list) opts="--json -v --verbose -h --help" ;;
    break) opts="-f --force --json -v --verbose -h --help" ;;
    doctor) # options, or the URLs to check
        opts="--json -t --ttl -h --help"
        if [[ $cur != -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "redis:// rediss:// unix:// redis-sentinel:// etcd://" -- "$cur")
            compopt -o nospace 2>/dev/null
            return 0
        fi
        ;;
    *) return 0 ;;
    esac
    if [ -z "$cmd" ] || [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
    fi
    return 0
}
complete -F _dlock dlock
