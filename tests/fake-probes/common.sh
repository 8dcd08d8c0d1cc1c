# shellcheck shell=sh
# Shared part of the fake probe programs (sourced, not run). Each fake takes the real probe's
# arguments (probes/PROTOCOL.md) and prints protocol lines that reproduce one known failure
# signature. FAKES: they simulate output and measure nothing.
#
# Simulated machine: AMD Radeon AI PRO R9700 (gfx1201, 32 GiB, wave 32, VMM granularity
# min 4 KiB / recommended 2 MiB) on ROCm 7.2. FAKE_PROBE_DEVICES (default 1) sets the device count.

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

MODE=""
DEVICE=0
PEER_FROM=0
PEER_TO=1
CYCLES=200
CHUNKS=4
SMOKE=1

fake_usage() {
    echo "$FAKE_NAME: $1" >&2
    echo "usage: $FAKE_NAME --list | --device N [--cycles C] [--chunks K] [--no-smoke] | --peer A B" >&2
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
            --peer)
                [ -z "$MODE" ] || fake_usage "more than one mode"
                is_uint "${2:-}" && is_uint "${3:-}" || fake_usage "--peer needs two device indices"
                [ "$2" != "$3" ] || fake_usage "--peer needs two different devices"
                MODE=peer; PEER_FROM=$2; PEER_TO=$3; shift 2 ;;
            --cycles) is_uint "${2:-}" && [ "$2" -ge 1 ] || fake_usage "--cycles needs a count >= 1"; CYCLES=$2; shift ;;
            --chunks) is_uint "${2:-}" && [ "$2" -ge 1 ] || fake_usage "--chunks needs a count >= 1"; CHUNKS=$2; shift ;;
            --no-smoke) SMOKE=0 ;;
            *) fake_usage "unexpected argument: $1" ;;
        esac
        shift
    done
    [ -n "$MODE" ] || fake_usage "give exactly one of --list, --device N, --peer A B"
}

# value(w, c) of the smoke pattern, as an unsigned 32-bit number.
pattern() {
    echo $(( (($1 * 2654435761) & 0xFFFFFFFF) ^ (($2 * 2246822519) & 0xFFFFFFFF) ^ 0xA5A5A5A5 ))
}

emit_hello() {
    printf '{"event":"hello","protocol":1,"probe":"gpuprobe-probe","backend":"hip","runtime_version":"%s","driver_version":"%s","device_count":%d,"error":null}\n' \
        "$FAKE_RUNTIME" "$FAKE_RUNTIME" "$FAKE_DEVICES"
}

# emit_device N: an R9700 at PCI bus 3+N, or the real probe's answer for an index out of range.
emit_device() {
    if [ "$1" -ge "$FAKE_DEVICES" ]; then
        printf '{"event":"device","index":%d,"name":"","arch":"","arch_features":null,"compute_capability":null,"vram_total_bytes":0,"vram_free_bytes":null,"pci_bus_id":null,"integrated":null,"wave_size":null,"vmm_supported":null,"granularity_min":null,"granularity_recommended":null,"error":{"api":"hipGetDeviceProperties","code":101,"name":"hipErrorInvalidDevice","message":"invalid device ordinal"}}\n' "$1"
        return 1
    fi
    printf '{"event":"device","index":%d,"name":"AMD Radeon AI PRO R9700","arch":"gfx1201","arch_features":null,"compute_capability":null,"vram_total_bytes":%s,"vram_free_bytes":%s,"pci_bus_id":"0000:%02x:00.0","integrated":false,"wave_size":32,"vmm_supported":true,"granularity_min":%d,"granularity_recommended":%d,"error":null}\n' \
        "$1" "$FAKE_VRAM_TOTAL" "$FAKE_VRAM_FREE" $((3 + $1)) "$FAKE_GRAN_MIN" "$FAKE_GRAN_REC"
}

emit_stage() { printf '{"event":"stage","stage":"%s","cycle":%d,"chunk":%d}\n' "$1" "$2" "$3"; }
emit_cycle() { printf '{"event":"cycle","cycle":%d}\n' "$1"; }
emit_done() { printf '{"event":"done"}\n'; }

# emit_smoke OUTCOME FAILED_STAGE(json) ERROR(json) CYCLES_DONE MISMATCHES FIRST_BAD_OFFSET FIRST_BAD_VALUE
#            EXPECTED WHOLE_RANGE_HELPED VRAM_AFTER ELAPSED_MS       (json values: null or a literal)
emit_smoke() {
    printf '{"event":"smoke","outcome":"%s","failed_stage":%s,"error":%s,"cycles_done":%d,"cycles":%d,"chunks_per_cycle":%d,"chunk_bytes":%d,"reserve_bytes":%s,"mismatches":%s,"first_bad_offset":%s,"first_bad_value":%s,"expected_value":%s,"whole_range_access_helped":%s,"vram_free_before":%s,"vram_free_after":%s,"elapsed_ms":%s}\n' \
        "$1" "$2" "$3" "$4" "$CYCLES" "$CHUNKS" "$FAKE_GRAN_REC" "$RESERVE_BYTES" "$5" "$6" "$7" "$8" "$9" "$FAKE_VRAM_FREE" "${10}" "${11}"
}

# The stage lines of chunk K in cycle 0, from create up to and including stage $2.
emit_chunk_stages() {
    for s in create map release set_access write verify; do
        emit_stage "$s" 0 "$1"
        [ "$s" != "$2" ] || return 0
    done
}

emit_peer_ok() {
    if [ "$PEER_FROM" -ge "$FAKE_DEVICES" ] || [ "$PEER_TO" -ge "$FAKE_DEVICES" ]; then
        printf '{"event":"peer","from":%d,"to":%d,"can_access":false,"copy_ok":null,"mismatches":0,"error":{"api":"gpuprobe","code":0,"name":"invalid_device_index","message":"peer device index out of range"}}\n' "$PEER_FROM" "$PEER_TO"
    else
        printf '{"event":"peer","from":%d,"to":%d,"can_access":true,"copy_ok":true,"mismatches":0,"error":null}\n' "$PEER_FROM" "$PEER_TO"
    fi
}

# Everything but the smoke test itself: --list, --peer, --no-smoke and a bad --device index are
# answered here (hello ... done) and the script exits. Returns only when a smoke test should run.
fake_preamble() {
    fake_parse_args "$@"
    emit_hello
    case "$MODE" in
        list)
            i=0
            while [ "$i" -lt "$FAKE_DEVICES" ]; do emit_device "$i"; i=$((i + 1)); done
            emit_done; exit 0 ;;
        peer) emit_peer_ok; emit_done; exit 0 ;;
    esac
    if ! emit_device "$DEVICE"; then
        if [ "$SMOKE" = 1 ]; then
            printf '{"event":"smoke","outcome":"fail","failed_stage":"context","error":{"api":"hipGetDeviceProperties","code":101,"name":"hipErrorInvalidDevice","message":"invalid device ordinal"},"cycles_done":0,"cycles":%d,"chunks_per_cycle":%d,"chunk_bytes":0,"reserve_bytes":%s,"mismatches":0,"first_bad_offset":null,"first_bad_value":null,"expected_value":null,"whole_range_access_helped":null,"vram_free_before":null,"vram_free_after":null,"elapsed_ms":0.000}\n' "$CYCLES" "$CHUNKS" "$RESERVE_BYTES"
        fi
        emit_done; exit 0
    fi
    if [ "$SMOKE" = 0 ]; then emit_done; exit 0; fi
    emit_stage context 0 0
}
