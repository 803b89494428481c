# shellcheck shell=bash
# Bash functions shared by the command wrapper and the timeout killer. Builtins only: when a
# fork bomb has used up the pids limit, a sweep that needs to fork could never run.
#
# No process may outlive the command that started it, and a process can leave its session,
# clear its environment, rename itself and be reparented to init, so the sweep does not try
# to recognise the command's processes: it kills every process in the container except
# init (PID 1), the keeper (init's oldest child, `sleep infinity`), the pids it is told to
# spare (itself), and the processes of open services (verification's web app): those hold
# a service token in their environment, or share a session a token holder leads.
lw_sweep() {
    local spare=" 1 $1 " round d pid line rest keeper kstart tok envline
    shift
    local -a f envs seen victims
    local -A sid_of holder lead
    for ((round = 0; round < 200; round++)); do
        keeper='' kstart=''
        seen=() sid_of=() holder=() lead=()
        for d in /proc/[0-9]*; do
            pid=${d#/proc/}
            [[ $spare == *" $pid "* ]] && continue
            read -r line 2>/dev/null < "$d/stat" || continue
            rest=${line##*) }
            # shellcheck disable=SC2206  # split on purpose: numbers and a state letter
            f=($rest)
            [[ ${f[0]} == Z ]] && continue
            if ((f[1] == 1)) && [[ -z $kstart || ${f[19]} -lt $kstart ]]; then
                keeper=$pid kstart=${f[19]}
            fi
            seen+=("$pid")
            sid_of[$pid]=${f[3]}
            if (($#)); then
                envs=()
                mapfile -d '' -t envs 2>/dev/null < "$d/environ"
                envline=" ${envs[*]} "
                for tok; do
                    if [[ $envline == *" LOOPWRIGHT_SERVICE_ID=$tok "* ]]; then
                        holder[$pid]=1
                        [[ ${f[3]} == "$pid" ]] && lead[$pid]=1
                        break
                    fi
                done
            fi
        done
        victims=()
        for pid in "${seen[@]}"; do
            [[ $pid == "$keeper" || -n ${holder[$pid]:-} ]] && continue
            [[ -n ${lead[${sid_of[$pid]}]:-} ]] && continue
            victims+=("$pid")
        done
        ((${#victims[@]})) || return 0
        # Frozen first, so that none runs again to see another die (a shell whose `sleep`
        # is killed would go on to its next command).
        kill -STOP "${victims[@]}" 2>/dev/null
        kill -KILL "${victims[@]}" 2>/dev/null
    done
}
# shellcheck disable=SC2034  # LW_COUNT is read by the caller
lw_counter() {
    # Prints nothing; sets LW_COUNT to the value of key $1 in the first readable file.
    local key=$1 file k v
    shift
    LW_COUNT=0
    for file in "$@"; do
        [[ -r $file ]] || continue
        while read -r k v; do
            if [[ $k == "$key" ]]; then LW_COUNT=$v; return; fi
        done < "$file"
    done
}
