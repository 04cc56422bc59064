#!/usr/bin/env bash
# The .deb, built from this build tree with CPack: its contents, control files and maintainer
# scripts, dependencies that resolve on this Debian, and a real install, remove and purge with
# dpkg into a scratch root (--force-script-chrootless, so the scripts run with DPKG_ROOT set and
# nothing outside the scratch root is touched). With EXPECT_HARDENED=1 (a tree built with the
# distribution's flags: packaging/build-deb, scripts/build --release), also that every packaged
# program is hardened.
#   deb_package_test.sh SOURCE_DIR BUILD_DIR EXPECT_AGENT(0|1) [EXPECT_HARDENED(0|1)]
set -euo pipefail

src="$1"
build="$2"
expect_agent="$3"
expect_hardened="${4:-0}"
work="$(mktemp -d /tmp/triage-deb-XXXXXX)"
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

if [[ $(id -u) -ne 0 ]]; then
  echo "deb_package_test: needs root (dpkg installs into a scratch root as root); skipped"
  exit 77
fi

# CPack writes into BUILD_DIR/packages; the test works on its own copy of the result.
deb="$("$src/packaging/build-deb" --from "$build" | tail -n 1)"
[[ -f "$deb" ]] || { echo "FAIL: no package built" >&2; exit 1; }
cp "$deb" "$work/slurm-triage.deb"
deb="$work/slurm-triage.deb"
pass "built $(basename "$(dirname "$deb")")/$(basename "$deb")"

# --- contents ---------------------------------------------------------------------------------
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/files"
plugin_line="$(grep -v '^#' "$src/slurm.conf.d/plugstack.conf.d/triage.conf" | grep -m1 spank_triage.so)"
plugin_path="$(awk '{print $2}' <<<"$plugin_line")"
expected=(
  "$plugin_path"
  /usr/bin/slurm-triage
  /etc/slurm/plugstack.conf.d/triage.conf
  /lib/systemd/system/slurm-triage-agent.service
  /usr/lib/tmpfiles.d/slurm-triage.conf
  /usr/share/doc/slurm-triage/install.md
  /usr/share/slurm-triage/grafana/slurm-triage.json
  /usr/share/slurm-triage/prometheus/slurm-triage.rules.yml
)
if [[ "$expect_agent" == 1 ]]; then expected+=(/usr/sbin/slurm-triage-agent); fi
for f in "${expected[@]}"; do
  if grep -qxF "$f" "$work/files"; then pass "contains $f"; else fail "missing $f"; fi
done
if grep -q '^/usr/local' "$work/files"; then fail "files under /usr/local"; fi
[[ "$plugin_line" == "optional $plugin_path default=basic" ]] ||
  fail "plugstack line is '$plugin_line'"

# The plugin in the package is the one slurmstepd can load: no sanitizer runtime, libc only.
dpkg-deb -x "$deb" "$work/x"
if nm -D "$work/x$plugin_path" | grep -qi asan; then fail "the packaged plugin is sanitized"; fi
needed="$(readelf -d "$work/x$plugin_path" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
[[ "$needed" == "libc.so.6 " ]] || fail "the packaged plugin needs: $needed"

# --- hardening ------------------------------------------------------------------------------
# What hardening-check (devscripts) reports, read with readelf: position-independent executables,
# full RELRO (a read-only GOT after relocation: GNU_RELRO and BIND_NOW), the stack protector
# (__stack_chk_fail) and _FORTIFY_SOURCE (the checked __*_chk variants of libc functions).
hardening_of() {
  local name=$1 f=$2
  readelf -lW "$f" >"$work/phdrs"
  readelf -dW "$f" >"$work/dynamic"
  readelf --dyn-syms -W "$f" | awk '{print $8}' | sed 's/@.*//' >"$work/syms"
  if [[ $name != *.so ]]; then
    grep -qE '\(FLAGS_1\).*\bPIE\b' "$work/dynamic" || fail "$name is not a PIE"
  fi
  grep -qw GNU_RELRO "$work/phdrs" || fail "$name has no RELRO segment"
  grep -qE '\(BIND_NOW\)|\(FLAGS\).*\bBIND_NOW\b|\(FLAGS_1\).*\bNOW\b' "$work/dynamic" ||
    fail "$name is not linked with BIND_NOW (-z now): its RELRO is partial"
  grep -qx __stack_chk_fail "$work/syms" || fail "$name has no stack protector"
  grep -qE '^__[a-z0-9_]+_chk$' "$work/syms" || fail "$name calls no _FORTIFY_SOURCE checked function"
}
if [[ "$expect_hardened" == 1 ]]; then
  programs=(/usr/bin/slurm-triage "$plugin_path")
  if [[ "$expect_agent" == 1 ]]; then programs+=(/usr/sbin/slurm-triage-agent); fi
  before=$failures
  for p in "${programs[@]}"; do hardening_of "$p" "$work/x$p"; done
  if ((failures == before)); then
    pass "hardened (PIE, full RELRO, stack protector, _FORTIFY_SOURCE): ${programs[*]}"
  fi
else
  echo "skipped: hardening (this tree was not built with the distribution's flags)"
fi

# --- control files and maintainer scripts -----------------------------------------------------
dpkg-deb -e "$deb" "$work/control"
grep -qxF /etc/slurm/plugstack.conf.d/triage.conf "$work/control/conffiles" ||
  fail "the plugstack snippet is not a conffile"
for s in postinst prerm postrm; do
  [[ -x "$work/control/$s" ]] || fail "$s is not executable"
  sh -n "$work/control/$s" || fail "$s: syntax error"
  if command -v shellcheck >/dev/null; then shellcheck -s sh "$work/control/$s" || fail "$s: shellcheck"; fi
done
pass "maintainer scripts parse"
grep -q '^Type=notify$' "$work/x/lib/systemd/system/slurm-triage-agent.service" ||
  fail "the unit is not Type=notify"
grep -q '^ExecStart=/usr/sbin/slurm-triage-agent' "$work/x/lib/systemd/system/slurm-triage-agent.service" ||
  fail "the unit does not start /usr/sbin/slurm-triage-agent"

# tmpfiles.d does what the agent and the plugin expect, applied for real to a scratch root.
mkdir -p "$work/tmproot"
systemd-tmpfiles --create --root="$work/tmproot" "$work/x/usr/lib/tmpfiles.d/slurm-triage.conf"
for d in /run/slurm-triage:755 /var/spool/slurm-triage:700 /var/spool/slurm-triage/inbox:700; do
  mode="$(stat -c %a "$work/tmproot${d%%:*}" 2>/dev/null || echo missing)"
  [[ "$mode" == "${d##*:}" ]] || fail "tmpfiles: ${d%%:*} is $mode"
done
pass "tmpfiles.d creates the socket, spool and inbox directories"

# --- dependencies resolve on this system ------------------------------------------------------
if apt-get install -s -o Debug::NoLocking=1 "$deb" >"$work/apt.out" 2>&1 &&
  grep -q '^Inst slurm-triage' "$work/apt.out"; then
  pass "apt resolves the dependencies: $(dpkg-deb -f "$deb" Depends)"
else
  fail "apt cannot install it: $(tail -n 5 "$work/apt.out")"
fi

# --- install, remove, purge with dpkg into a scratch root ------------------------------------
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkgr=(dpkg --root="$root" --force-script-chrootless --force-depends --log=/dev/null)
if "${dpkgr[@]}" -i "$deb" >"$work/dpkg.out" 2>&1; then
  pass "dpkg -i"
else
  fail "dpkg -i: $(cat "$work/dpkg.out")"
fi
status="$(dpkg --root="$root" -s slurm-triage 2>/dev/null | sed -n 's/^Status: //p')"
[[ "$status" == "install ok installed" ]] || fail "status after install: $status"
for f in "${expected[@]}"; do
  [[ -e "$root$f" ]] || fail "not installed: $f"
done
for d in /var/spool/slurm-triage /var/spool/slurm-triage/inbox; do
  [[ "$(stat -c '%a %U' "$root$d" 2>/dev/null)" == "700 root" ]] || fail "postinst: $d"
done
[[ -d "$root/run/slurm-triage" ]] || fail "postinst: /run/slurm-triage"
pass "installed with the spool and inbox private to root"

touch "$root/var/spool/slurm-triage/inbox/leftover.json"
"${dpkgr[@]}" -r slurm-triage >"$work/dpkg.out" 2>&1 || fail "dpkg -r: $(cat "$work/dpkg.out")"
[[ ! -e "$root/usr/bin/slurm-triage" ]] || fail "remove left /usr/bin/slurm-triage"
[[ ! -e "$root$plugin_path" ]] || fail "remove left the plugin"
[[ -e "$root/etc/slurm/plugstack.conf.d/triage.conf" ]] || fail "remove dropped the conffile"
[[ -e "$root/var/spool/slurm-triage/inbox/leftover.json" ]] || fail "remove dropped the spool"
pass "dpkg -r keeps configuration and spool"

"${dpkgr[@]}" -P slurm-triage >"$work/dpkg.out" 2>&1 || fail "dpkg -P: $(cat "$work/dpkg.out")"
[[ ! -e "$root/etc/slurm/plugstack.conf.d/triage.conf" ]] || fail "purge left the conffile"
[[ ! -e "$root/var/spool/slurm-triage" ]] || fail "purge left the spool"
pass "dpkg -P removes configuration and spool"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "deb package: all checks passed"
