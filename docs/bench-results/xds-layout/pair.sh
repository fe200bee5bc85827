#!/usr/bin/env bash
cd /work/bench
for i in 1 2 3; do
 for w in before after; do
  ./xdsload-$w run --delta -c 1000 -n 1000 --changes 50 --impls xdsbridge --runs 1 --out out/$w-s1-$i > log/$w-s1-$i.txt 2>&1
  ./xdsload-$w bench --scenarios S6 --impls xdsbridge -c 1000 --runs 1 --timeout 4m --out out/$w-s6-$i > log/$w-s6-$i.txt 2>&1
 done
done
echo done > pair.done
