#!/usr/bin/env bash
# Paired quiet-machine runs: 14a47a8 ("before") and main ("now") under one load generator, rounds alternated.
cd /work/bench/q
L=./xdsload-now
SB=14a47a8=./srv-14a47a8,final=./srv-final
for i in 1 2 3; do
  for w in 14a47a8 final; do
    uptime > log-s1-$w-$i.txt
    $L run --delta -c 1000 -n 1000 --changes 50 --impls xdsbridge@$w --server-bin $SB --runs 1 --warmup=false --out out/s1-$w-$i >> log-s1-$w-$i.txt 2>&1
    uptime >> log-s1-$w-$i.txt
  done
done
for i in 1 2 3; do
  for w in 14a47a8 final; do
    uptime > log-s6-$w-$i.txt
    $L bench --scenarios S6 --impls xdsbridge@$w --server-bin $SB -c 1000 --runs 1 --timeout 4m --warmup=false --out out/s6-$w-$i >> log-s6-$w-$i.txt 2>&1
    uptime >> log-s6-$w-$i.txt
  done
done
echo done > pair2.done
