# The tools a user would pick instead of boxkite, measured in the same run as the figure each is
# set against (sourced by bench/exec.sh and bench/files.sh; `make deps` installs them):
#
#   bubblewrap   a bare isolated spawn of `true`: new network, PID, IPC, UTS and cgroup
#                namespaces, the host's /usr and /etc read-only, a fresh /proc, /dev and /tmp,
#                then setpriv to uid/gid 1001 with no capability — against the exec round trip;
#   scp          256 MiB each way with -c aes128-gcm@openssh.com over loopback — against bkctl cp;
#   tar | ssh    a tree of small files, `tar c | ssh | tar x` — against bkctl cp -r.
#
# The ssh peers talk to an sshd of the bench's own: its host key, an authorized key and a free
# port, made in a scratch directory, started by peer_sshd_start and stopped by peer_sshd_stop
# (the caller's EXIT trap must call it). A peer that cannot run prints SKIP and why, and no
# figure: a ratio is then left out rather than made up.

# peer_bwrap_argv: the bubblewrap spawn's command line, one word a line (the root as a
# container image would show it: the host's merged-/usr symlinks kept as symlinks).
peer_bwrap_argv() {
	local d
	printf '%s\n' bwrap --unshare-net --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup \
		--die-with-parent --new-session --ro-bind /usr /usr --ro-bind /etc /etc
	for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
		if [ -L "$d" ]; then
			printf '%s\n' --symlink "$(readlink "$d")" "$d"
		elif [ -d "$d" ]; then
			printf '%s\n' --ro-bind "$d" "$d"
		fi
	done
	printf '%s\n' --proc /proc --dev /dev --tmpfs /tmp \
		setpriv --reuid 1001 --regid 1001 --clear-groups --inh-caps=-all --bounding-set=-all true
}

# peer_bwrap EXEC_BENCH N WARMUP: N timed spawns of the bubblewrap peer, its bench lines
# (peer_bwrap_spawn_p50, _p99), or SKIP.
peer_bwrap() {
	local -a argv
	if ! command -v bwrap >/dev/null || ! command -v setpriv >/dev/null; then
		echo "peer bubblewrap: SKIP (bwrap or setpriv not installed: make deps)"
		return 0
	fi
	mapfile -t argv < <(peer_bwrap_argv)
	if ! "${argv[@]}" >/dev/null 2>&1; then
		echo "peer bubblewrap: SKIP (it cannot run here: $("${argv[@]}" 2>&1 | head -1))"
		return 0
	fi
	echo "== peer: bubblewrap spawn of true, ${argv[*]:1:5} ... setpriv to 1001"
	"$1" spawn peer_bwrap_spawn "$2" "$3" -- "${argv[@]}"
}

peer_ssh_dir=
peer_sshd_pid=

# peer_sshd_start DIR: an sshd on 127.0.0.1 at a free port with keys of its own in DIR; sets
# peer_ssh (the ssh command line) and returns 0, or prints SKIP and returns 1.
peer_sshd_start() {
	local dir=$1 port
	if ! command -v ssh >/dev/null || ! command -v scp >/dev/null || [ ! -x /usr/sbin/sshd ]; then
		echo "peer ssh: SKIP (openssh client or server not installed: make deps)"
		return 1
	fi
	mkdir -p "$dir"
	peer_ssh_dir=$dir
	ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
	ssh-keygen -q -t ed25519 -N '' -f "$dir/user_key"
	cp "$dir/user_key.pub" "$dir/authorized_keys"
	# sshd's privilege separation directory, as Debian's unit makes it.
	mkdir -p /run/sshd
	for _ in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
		cat >"$dir/sshd_config" <<-EOF
			ListenAddress 127.0.0.1
			Port $port
			HostKey $dir/host_key
			AuthorizedKeysFile $dir/authorized_keys
			PidFile $dir/sshd.pid
			PermitRootLogin prohibit-password
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			UsePAM no
			StrictModes no
			Subsystem sftp internal-sftp
		EOF
		/usr/sbin/sshd -D -e -f "$dir/sshd_config" 2>"$dir/sshd.log" &
		peer_sshd_pid=$!
		echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host_key.pub")" >"$dir/known_hosts"
		peer_ssh=(ssh -F /dev/null -p "$port" -i "$dir/user_key" -o BatchMode=yes -o IdentitiesOnly=yes
			-o UserKnownHostsFile="$dir/known_hosts" -o StrictHostKeyChecking=yes -o LogLevel=ERROR)
		peer_scp=(scp -q -F /dev/null -P "$port" -i "$dir/user_key" -o BatchMode=yes -o IdentitiesOnly=yes
			-o UserKnownHostsFile="$dir/known_hosts" -o StrictHostKeyChecking=yes -o LogLevel=ERROR
			-c aes128-gcm@openssh.com)
		for _ in $(seq 100); do
			"${peer_ssh[@]}" "$(id -un)@127.0.0.1" true 2>/dev/null && return 0
			kill -0 "$peer_sshd_pid" 2>/dev/null || break
			sleep 0.05
		done
		peer_sshd_stop
		grep -qi "address already in use" "$dir/sshd.log" 2>/dev/null && continue
		echo "peer ssh: SKIP (the bench's sshd did not answer: $(tail -1 "$dir/sshd.log" 2>/dev/null))"
		return 1
	done
	echo "peer ssh: SKIP (no free port for the bench's sshd)"
	return 1
}

peer_sshd_stop() {
	[ -z "$peer_sshd_pid" ] || { kill "$peer_sshd_pid" 2>/dev/null; wait "$peer_sshd_pid" 2>/dev/null || true; }
	peer_sshd_pid=
}

# peer_seconds CMD...: the wall time of CMD in seconds (its output dropped; fails with it).
peer_seconds() {
	local start end
	start=$(date +%s.%N)
	"$@" >/dev/null
	end=$(date +%s.%N)
	echo "$end - $start" | bc -l
}
