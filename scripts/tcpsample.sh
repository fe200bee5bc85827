#!/usr/bin/env bash
# tcpsample.sh PID DIR [INTERVAL]
#
# Samples the kernel's TCP memory and counters while the load generator
# PID (an `xdsload run` or `xdsload bench`) runs, into DIR:
#
#   samples.tsv  every INTERVAL seconds (default 1): the sockstat line (TCP
#                sockets in use, orphans, TIME_WAIT, and "mem", the pages
#                every TCP socket's buffers hold, which the kernel compares
#                with tcp_mem), tcp_mem itself, the server's open files and
#                the CPU ticks of the server and of the load generator, and
#                the TCP counters that say why a segment or a connection was
#                dropped, and softnet_drops, the packets the kernel's per-CPU
#                input queues dropped (netdev_max_backlog; loopback traffic
#                goes through them) (absolute values since boot: subtract
#                the first row)
#   ss.tsv       every 10th sample: established connections to the server's
#                listeners on the clients' side and on the server's, and the
#                bytes queued in them (Recv-Q, Send-Q) on each side
#   nstat-start.txt, nstat-end.txt  `nstat -az` when sampling starts and ends
#
# The server is the load generator's child (`xdsload serve`); a new one is
# picked up at each run of an invocation. It stops when PID has exited.
set -u
pid=$1 dir=$2 interval=${3:-1}
mkdir -p "$dir"
nstat -az >"$dir/nstat-start.txt" 2>&1
counters="TcpExtListenOverflows TcpExtListenDrops TcpExtTCPMemoryPressures TcpExtTCPMemoryPressuresChrono
TcpExtTCPRcvQDrop TcpExtPruneCalled TcpExtRcvPruned TcpExtOfoPruned TcpExtTCPAbortOnMemory TcpExtTCPAbortOnTimeout
TcpExtTCPTimeouts TcpExtTCPOFODrop TcpExtTCPBacklogDrop TcpExtTCPReqQFullDrop TcpExtTCPZeroWindowDrop
TcpExtTCPRcvCollapsed TcpExtTCPToZeroWindowAdv TcpExtTCPWantZeroWindowAdv TcpExtTCPRetransFail TcpExtSyncookiesSent
TcpExtSyncookiesRecv TcpExtSyncookiesFailed TcpExtTCPAbortOnData TcpExtTCPAbortOnClose TcpExtTCPSynRetrans
TcpExtTCPKeepAlive TcpRetransSegs TcpActiveOpens TcpPassiveOpens TcpAttemptFails TcpEstabResets TcpCurrEstab TcpOutRsts"
counters=$(echo $counters)

# netstat prints every counter of /proc/net/netstat and /proc/net/snmp's
# Tcp section as NAME VALUE lines.
netstat_all() {
	awk '
		/^(TcpExt|Tcp):/ { if (!(FILENAME SUBSEP $1 in hdr)) { hdr[FILENAME SUBSEP $1] = $0; next }
			split(hdr[FILENAME SUBSEP $1], h); p = $1; sub(":", "", p)
			for (i = 2; i <= NF; i++) print p h[i], $i }
	' /proc/net/netstat /proc/net/snmp
}

ticks() { [ -n "$1" ] && awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo -; }

printf 'time\tsecs\tinuse\torphan\ttw\talloc\tmem\ttcp_mem_max\tserver_pid\tserver_fds\tserver_ticks\tloadgen_ticks\tsoftnet_drops\t%s\n' \
	"$(echo $counters | tr ' ' '\t')" >"$dir/samples.tsv"
printf 'time\tserver_pid\tports\tclient_estab\tclient_recvq\tclient_sendq\tserver_estab\tserver_recvq\tserver_sendq\n' >"$dir/ss.tsv"
start=$(date +%s.%N) n=0 spid= ports=
while kill -0 "$pid" 2>/dev/null; do
	now=$(date +%s.%N)
	cur=$(pgrep -P "$pid" -f ' serve ' | head -1)
	if [ "$cur" != "$spid" ]; then
		spid=$cur ports=
	fi
	if [ -n "$spid" ] && [ -z "$ports" ]; then
		ports=$(ss -tlnpH 2>/dev/null | awk -v p="pid=$spid," 'index($0, p) { n = split($4, a, ":"); printf "%s%s", s, a[n]; s = "," }')
	fi
	sock=$(awk '/^TCP:/ { print $3 "\t" $5 "\t" $7 "\t" $9 "\t" $11 }' /proc/net/sockstat)
	tmax=$(awk '{ print $3 }' /proc/sys/net/ipv4/tcp_mem)
	drops=0
	while read -r _ d _; do drops=$((drops + 0x$d)); done </proc/net/softnet_stat
	fds=-
	[ -n "$spid" ] && fds=$(ls "/proc/$spid/fd" 2>/dev/null | wc -l)
	vals=$(netstat_all | awk -v want="$counters" 'BEGIN { n = split(want, w, " ") } { v[$1] = $2 }
		END { for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? "\t" : ""), (w[i] in v ? v[w[i]] : "-") }')
	printf '%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%T)" "$(echo "$now - $start" | bc)" "$sock" "$tmax" \
		"${spid:--}" "$fds" "$(ticks "$spid")" "$(ticks "$pid")" "$drops" "$vals" >>"$dir/samples.tsv"
	if [ $((n % 10)) -eq 0 ] && [ -n "$ports" ]; then
		ss -tnH state established 2>/dev/null | awk -v ports="$ports" -v t="$(date -u +%T)" -v sp="$spid" '
			BEGIN { split(ports, a, ","); for (i in a) lp[a[i]] = 1 }
			{ nl = split($3, l, ":"); np = split($4, r, ":")
			  if (l[nl] in lp) { se++; sr += $1; ss += $2 } else if (r[np] in lp) { ce++; cr += $1; cs += $2 } }
			END { printf "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", t, sp, ports, ce, cr, cs, se, sr, ss }' >>"$dir/ss.tsv"
	fi
	n=$((n + 1))
	sleep "$interval"
done
nstat -az >"$dir/nstat-end.txt" 2>&1
