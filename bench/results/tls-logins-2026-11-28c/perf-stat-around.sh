#!/bin/bash
# Counts go to $PERF_STAT_DIR/statN.txt (N: the variant's place in TLS_VARIANTS).
d=${PERF_STAT_DIR:-/tmp}
if [ "$1" = start ]; then
  n=$(( $(cat $d/scount 2>/dev/null || echo 0) + 1 )); echo $n > $d/scount
  for p in $(pgrep -f 'thronglogins@127.0.0.1'); do if grep -q beam /proc/$p/comm; then beam=$p; fi; done
  nohup perf stat -e context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_recvfrom,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_writev,syscalls:sys_enter_sendto -p $beam -o $d/stat$n.txt > /dev/null 2>&1 &
  echo $! > $d/statpid; sleep 1
else
  kill -INT $(cat $d/statpid); sleep 1
fi
