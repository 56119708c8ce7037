# Sourced by the shim's tests that run Debian's verbs programs (ibv_devinfo, rping). Under
# --config=asan (or tsan) the shim's libraries need their sanitizer runtime loaded first, which
# a program built without it does not do ("ASan runtime does not come first"): preload it for
# them, and do not hold those programs' own leaks against the shim.
preload_sanitizer_runtime() {  # <the shim's libibverbs.so.1>
  local runtimes
  runtimes="$(ldd "$1" | awk '/lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)"
  [[ -n "$runtimes" ]] || return 0
  export LD_PRELOAD="$runtimes${LD_PRELOAD:+:$LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}
