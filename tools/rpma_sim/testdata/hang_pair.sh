#!/usr/bin/env bash
# hang_pair.sh PROGRAM PORT MODE: the two processes of hang_pair.c as a user's script runs them.
#   deadlock: a server and a client that each wait for the other to disconnect (hung)
#   orphan:   a listener, and a client that fails at once: the listener waits for ever
#             (orphaned); the script only waits for both, as pair scripts do
set -u
prog="$1"
port="$2"
case "$3" in
  deadlock)
    RPMA_SIM_ROLE=server "$prog" server 127.0.0.1 "$port" &
    sleep 0.3
    RPMA_SIM_ROLE=client "$prog" client 127.0.0.1 "$port" &
    ;;
  orphan)
    RPMA_SIM_ROLE=server "$prog" listen 127.0.0.1 "$port" &
    sleep 0.3
    RPMA_SIM_ROLE=client "$prog" quit 127.0.0.1 "$port" &
    ;;
  *) echo "hang_pair.sh: unknown mode $3" >&2; exit 2 ;;
esac
wait
