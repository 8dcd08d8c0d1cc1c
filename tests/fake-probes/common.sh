# shellcheck shell=sh
# Shared part of the fake probe programs (sourced, not run). Each fake takes the real probe's
# arguments (probes/PROTOCOL.md, version 2) and prints protocol lines that reproduce one known
# failure signature. FAKES: they simulate output and measure nothing.
#
# Simulated machine: AMD Radeon AI PRO R9700 (gfx1201, 32 GiB, wave 32, VMM granularity
# min 4 KiB / recommended 2 MiB) on ROCm 7.2. FAKE_PROBE_DEVICES (default 1) sets the device count.
#
# The growths printed are the ones probes/smoke-plan.toml gives at 2 MiB granularity with this
# much free VRAM (`gpuprobe __child cuda --plan 2097152 33863958528` prints them): every cycle
# pools 0, 1, 2 grow by 6 MiB, then 2 MiB, then 10 MiB, in turn (growths 0..8); in cycle 0 pool 0
# then grows past 1 GiB by 24, 82, 184 and 748 MiB (growths 9..12).

# shellcheck disable=SC3045
ulimit -c 0 2>/dev/null || true   # the crashing fakes must not leave core files behind

FAKE_NAME=${0##*/}
FAKE_DEVICES=${FAKE_PROBE_DEVICES:-1}
FAKE_RUNTIME=7.2.26015
FAKE_VRAM_TOTAL=34208743424
FAKE_VRAM_FREE=33863958528
FAKE_GRAN_MIN=4096
FAKE_GRAN_REC=2097152
RESERVE_BYTES=34359738368
MIB=1048576

MODE=""
DEVICE=0
CYCLES=200
SMOKE=1

fake_usage() {
    echo "$FAKE_NAME: $1" >&2
    echo "usage: $FAKE_NAME --list | --device N [--cycles C] [--no-smoke] | --peers" >&2
    exit 2
}

is_uint() { case "$1" in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }

fake_parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --list) [ -z "$MODE" ] || fake_usage "more than one mode"; MODE=list ;;
            --device)
                [ -z "$MODE" ] || fake_usage "more than one mode"
                is_uint "${2:-}" || fake_usage "--device needs a device index"
                MODE=device; DEVICE=$2; shift ;;
            --peers) [ -z "$MODE" ] || fake_usage "more than one mode"; MODE=peers ;;
            --cycles) is_uint "${2:-}" && [ "$2" -ge 1 ] || fake_usage "--cycles needs a count >= 1"; CYCLES=$2; shift ;;
            --no-smoke) SMOKE=0 ;;
            *) fake_usage "unexpected argument: $1" ;;
        esac
        shift
    done
    [ -n "$MODE" ] || fake_usage "give exactly one of --list, --device N, --peers"
}

# value(w, seed) of the smoke pattern, as an unsigned 32-bit number; seed = cycle * 8 + pool.
pattern() {
    echo $(( (($1 * 2654435761) & 0xFFFFFFFF) ^ (($2 * 2246822519) & 0xFFFFFFFF) ^ 0xA5A5A5A5 ))
}

emit_hello() {
    printf '{"event":"hello","protocol":2,"probe":"gpuprobe-probe","backend":"hip","runtime_version":"%s","driver_version":"%s","device_count":%d,"init_ms":41.500,"error":null}\n' \
        "$FAKE_RUNTIME" "$FAKE_RUNTIME" "$FAKE_DEVICES"
}

# emit_device N: an R9700 at PCI bus 3+N, or the real probe's answer for an index out of range.
emit_device() {
    if [ "$1" -ge "$FAKE_DEVICES" ]; then
        printf '{"event":"device","index":%d,"name":"","arch":"","arch_features":null,"compute_capability":null,"vram_total_bytes":0,"vram_free_bytes":null,"pci_bus_id":null,"integrated":null,"wave_size":null,"vmm_supported":null,"granularity_min":null,"granularity_recommended":null,"context_ms":null,"queries_ms":0.100,"error":{"api":"hipGetDeviceProperties","code":101,"name":"hipErrorInvalidDevice","message":"invalid device ordinal"}}\n' "$1"
        return 1
    fi
    printf '{"event":"device","index":%d,"name":"AMD Radeon AI PRO R9700","arch":"gfx1201","arch_features":null,"compute_capability":null,"vram_total_bytes":%s,"vram_free_bytes":%s,"pci_bus_id":"0000:%02x:00.0","integrated":false,"wave_size":32,"vmm_supported":true,"granularity_min":%d,"granularity_recommended":%d,"context_ms":120.000,"queries_ms":2.250,"error":null}\n' \
        "$1" "$FAKE_VRAM_TOTAL" "$FAKE_VRAM_FREE" $((3 + $1)) "$FAKE_GRAN_MIN" "$FAKE_GRAN_REC"
}

# emit_stage STAGE CYCLE POOL GROWTH
emit_stage() { printf '{"event":"stage","stage":"%s","cycle":%d,"pool":%d,"growth":%d}\n' "$1" "$2" "$3" "$4"; }
emit_cycle() { printf '{"event":"cycle","cycle":%d}\n' "$1"; }
emit_done() { printf '{"event":"done"}\n'; }

# The stage lines of growth G (of pool P) in cycle 0, from create up to and including stage $4.
emit_growth_stages() {
    emit_stage create 0 "$1" "$2"
    [ "$3" != create ] || return 0
    [ "$2" -ge 3 ] || emit_stage reserve 0 "$1" "$2"
    for s in map release set_access write verify; do
        emit_stage "$s" 0 "$1" "$2"
        [ "$s" != "$3" ] || return 0
    done
}

# Cycle 0 up to (and including) stage $2 of growth $1; "all" for the whole cycle phase.
emit_cycle0_until() {
    emit_cycle 0
    g=0
    while [ "$g" -lt 9 ]; do
        if [ "$g" = "$1" ]; then emit_growth_stages $((g % 3)) "$g" "$2"; return 0; fi
        emit_growth_stages $((g % 3)) "$g" verify
        g=$((g + 1))
    done
}

# The long phase of cycle 0 (growths 9..12 of pool 0, a busy kernel before each), the late
# checks, unmap and free.
emit_long_phase() {
    for g in 9 10 11 12; do
        emit_stage busy 0 0 "$g"
        emit_growth_stages 0 "$g" verify
    done
    emit_stage sync 0 0 0
    emit_stage settle 0 0 0
    emit_stage sync 0 0 0
    emit_stage host_compare 0 0 0
}

emit_cycle_end() {
    emit_stage unmap "$1" 0 0
    if [ "$1" = 0 ]; then for p in 0 1 2; do emit_stage free 0 "$p" 0; done; fi
}

# Cycles 1.. : a create line per growth, the wait, the unmap.
emit_later_cycles() {
    c=1
    while [ "$c" -lt "$CYCLES" ]; do
        emit_cycle "$c"
        g=0
        while [ "$g" -lt 9 ]; do emit_stage create "$c" $((g % 3)) "$g"; g=$((g + 1)); done
        emit_stage sync "$c" 0 0
        emit_cycle_end "$c"
        c=$((c + 1))
    done
}

# The smoke event. Defaults describe a clean full run; fakes set S_* before calling it.
emit_smoke() {
    printf '{"event":"smoke","outcome":"%s","plan_version":2,"failed_stage":%s,"error":%s,"failed_cycle":%s,"failed_pool":%s,"failed_growth":%s,"cycles_done":%d,"cycles":%d,"min_cycles":200,"pools":3,"chunks_per_cycle":9,"chunk_bytes":%d,"smallest_chunk_bytes":%s,"largest_chunk_bytes":%s,"largest_pool_bytes":%s,"long_target_bytes":1073741824,"long_growths":4,"host_checked_bytes":%s,"reserve_bytes":%s,"mismatches":%s,"first_bad_offset":%s,"first_bad_value":%s,"expected_value":%s,"bad_check":%s,"whole_range_access_helped":%s,"vram_free_before":%s,"vram_free_after":%s,"elapsed_ms":%s,"long_phase_ms":%s}\n' \
        "${S_OUTCOME:-pass}" "${S_STAGE:-null}" "${S_ERROR:-null}" "${S_CYCLE:-null}" "${S_POOL:-null}" "${S_GROWTH:-null}" \
        "${S_CYCLES_DONE:-$CYCLES}" "$CYCLES" "$FAKE_GRAN_REC" "${S_SMALLEST:-$((2 * MIB))}" "${S_LARGEST:-$((748 * MIB))}" \
        "${S_POOL_MAX:-$((1056 * MIB))}" "${S_HOST:-$((1092 * MIB))}" "$RESERVE_BYTES" "${S_MISMATCHES:-0}" \
        "${S_BAD_OFFSET:-null}" "${S_BAD_VALUE:-null}" "${S_EXPECTED:-null}" "${S_BAD_CHECK:-null}" "${S_WHOLE:-null}" \
        "$FAKE_VRAM_FREE" "${S_VRAM_AFTER:-$FAKE_VRAM_FREE}" "${S_ELAPSED:-$CYCLES.500}" "${S_LONG_MS:-18.250}"
}

# emit_peers [VMM_OK VMM_MISMATCHES VMM_STAGE]: one peer event per pair of devices, then peers_done.
emit_peers() {
    a=0
    while [ "$a" -lt "$FAKE_DEVICES" ]; do
        b=$((a + 1))
        while [ "$b" -lt "$FAKE_DEVICES" ]; do
            printf '{"event":"peer","from":%d,"to":%d,"can_access":true,"reverse_can_access":true,"copy_ok":true,"mismatches":0,"error":null,"vmm_ok":%s,"vmm_mismatches":%s,"vmm_stage":%s,"vmm_error":null,"copy_ms":9.500}\n' \
                "$a" "$b" "${1:-true}" "${2:-0}" "${3:-null}"
            b=$((b + 1))
        done
        a=$((a + 1))
    done
    printf '{"event":"peers_done","devices":%d,"contexts_ms":150.000,"elapsed_ms":180.000}\n' "$FAKE_DEVICES"
}

# Everything but the smoke test itself: --list, --peers, --no-smoke and a device the runtime does
# not show are answered here (hello ... done) and the script exits. Returns only when a smoke test
# should run.
fake_preamble() {
    fake_parse_args "$@"
    emit_hello
    case "$MODE" in
        list)
            i=0
            while [ "$i" -lt "$FAKE_DEVICES" ]; do emit_device "$i"; i=$((i + 1)); done
            emit_done; exit 0 ;;
        peers) emit_peers true 0 null; emit_done; exit 0 ;;
    esac
    if [ "$DEVICE" -ge "$FAKE_DEVICES" ]; then emit_done; exit 0; fi
    emit_device "$DEVICE"
    if [ "$SMOKE" = 0 ]; then emit_done; exit 0; fi
    emit_stage context 0 0 0
}

# A complete clean run of every cycle (for fakes whose failure is elsewhere).
emit_clean_run() {
    emit_cycle0_until -1 -
    emit_long_phase
    emit_cycle_end 0
    emit_later_cycles
    emit_stage vram_check "$CYCLES" 0 0
    emit_smoke
}
