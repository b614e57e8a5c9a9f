# Sourced by the benchmarks that start a boxkited of their own (bash; $build names the build).

# Wait until the boxkited of pid $1 answers Health with its sandbox ready (at most 10 s), asking
# the one BOXKITE_URL and BOXKITE_KEY_FILE name. Fails if it exits first or the 10 s go by.
boxkited_ready() {
	local pid=$1 _
	for _ in $(seq 200); do
		"$build/bkctl" -o json health 2>/dev/null | grep -q '"sandbox_ready": *true' && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
