#!/usr/bin/env bash
# screenshot.sh makes docs/dashboard/screenshot.png: the Grafana dashboard
# (docs/grafana-dashboard.json) drawn from a real run of examples/pipeline.
#
# A Prometheus scrapes the pipeline every second (and loads docs/alerts.yml,
# so the rules are checked by a real Prometheus too) through two runs on one
# data dir: first with a slow sink, so the channel fills and the source
# waits; then, after a restart, with a fast sink that drains it. render.mjs
# evaluates every panel's expressions on that Prometheus and draws them in
# a static HTML page, and headless Chromium takes its picture.
#
# Needs go, node (18+), prometheus and chromium, and pngquant if it is to
# make the file small (Debian: apt-get install prometheus chromium
# pngquant). No network is used. Run it from anywhere in the repository:
#
#	docs/dashboard/screenshot.sh            # two runs of 45 s each
#	PHASE=20s docs/dashboard/screenshot.sh  # shorter
#
# OUT=FILE.png writes the picture elsewhere, HTML=FILE.html keeps the page.
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
phase=${PHASE:-45s}
metrics_addr=${METRICS_ADDR:-127.0.0.1:19464}
prom_addr=${PROM_ADDR:-127.0.0.1:19090}
out=${OUT:-$root/docs/dashboard/screenshot.png}
html=${HTML:-} # where to keep the HTML page as well (default: not kept)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

for tool in go node prometheus chromium; do
	command -v "$tool" >/dev/null || { echo "screenshot.sh: $tool is not installed" >&2; exit 1; }
done

go build -o "$work/pipeline" "$root/examples/pipeline"
cp "$root/docs/alerts.yml" "$work/alerts.yml"
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: pipeline
    static_configs:
      - targets: ['$metrics_addr']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address="$prom_addr" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
	curl -fs "http://$prom_addr/-/ready" >/dev/null 2>&1 && break
	sleep 0.2
done
curl -fs "http://$prom_addr/-/ready" >/dev/null || { cat "$work/prometheus.log" >&2; exit 1; }

start=$(date +%s)
# A sink slower than the source: the channel fills and the source waits.
"$work/pipeline" -dir "$work/fc" -metrics-addr "$metrics_addr" -duration "$phase" \
	-rate 3000 -sink-delay 40ms -capacity 10000 >"$work/run1.log"
sleep 2
# Restarted with a fast sink: the channel drains.
"$work/pipeline" -dir "$work/fc" -metrics-addr "$metrics_addr" -duration "$phase" \
	-rate 3000 -capacity 10000 >"$work/run2.log"
sleep 2
end=$(date +%s)
tail -n 2 "$work/run1.log" "$work/run2.log"

node "$root/docs/dashboard/render.mjs" "http://$prom_addr" "$start" "$end" "$work/dashboard.html" | tee "$work/render.log"
[ -z "$html" ] || cp "$work/dashboard.html" "$html"
height=$(sed -n 's/.* \([0-9]*\) px high$/\1/p' "$work/render.log")
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--hide-scrollbars --user-data-dir="$work/chromium" --screenshot="$out" \
	--window-size="1400,$height" "file://$work/dashboard.html" 2>"$work/chromium.log" ||
	{ cat "$work/chromium.log" >&2; exit 1; }
# The dark page has few colours: a palette PNG is a third of the size.
if command -v pngquant >/dev/null; then
	pngquant --force --skip-if-larger --output "$out" -- "$out" || true
fi
echo "wrote $out ($(stat -c %s "$out") bytes)"
