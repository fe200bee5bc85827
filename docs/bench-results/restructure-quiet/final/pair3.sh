#!/usr/bin/env bash
cd /work/bench/q
while [ ! -f pair2.done ]; do sleep 5; done
uptime > pair3.uptime
cd /work/bench/xt
for i in 1 2 3 4 5 6 7 8; do
  for b in before after; do
    ./$b.test -test.run '^$' -test.bench 'Apply$/(sotw|delta)/C=1000/' -test.count 1 >>"$b.txt" 2>&1
  done
done
uptime >> /work/bench/q/pair3.uptime
cd /work/bench/q
L=./xdsload-now
SB=14a47a8=./srv-14a47a8,now=./srv-now,final=./srv-final
for i in 1 2 3; do
  for w in 14a47a8 now final; do
    uptime > log3-s1-$w-$i.txt
    $L run --delta -c 1000 -n 1000 --changes 50 --impls xdsbridge@$w --server-bin $SB --runs 1 --warmup=false --out out3/s1-$w-$i >> log3-s1-$w-$i.txt 2>&1
    uptime >> log3-s1-$w-$i.txt
  done
done
uptime >> pair3.uptime
echo done > pair3.done
