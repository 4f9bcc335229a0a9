#!/bin/bash
d=/tmp/prof
if [ "$1" = start ]; then
  n=$(( $(cat $d/scount 2>/dev/null || echo 0) + 1 )); echo $n > $d/scount
  for p in $(pgrep -f 'thronglogins@127.0.0.1'); do if grep -q beam /proc/$p/comm; then beam=$p; fi; done
  echo $beam > $d/beam
  nohup perf record -F 2999 -g -p $beam -o $d/rec$n.data > $d/rec$n.log 2>&1 &
  echo $! > $d/recpid; sleep 1
else
  kill -INT $(cat $d/recpid); sleep 2
fi
