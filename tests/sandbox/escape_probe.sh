# The escape probe: everything a hostile step or agent would try, each attempt printing
# "LEAK <what>" if it worked. It also proves it ran, by finding its own file and its own
# process ("OK own-file", "OK own-process"), so that a probe that never ran cannot pass.
# The lines above it (written by the test) set DATA_DIR, CHECKOUT, OTHER_RUN, OTHER_MARKER,
# WORKER_PID, VICTIM_SOCKET, STOLEN_TOKEN and CANARY_B64 (the canaries, one per line, in
# base64: written plainly they would be in this probe's own command line).

CANARY_LIST=$(printf '%s' "$CANARY_B64" | base64 -d)
leak() { echo "LEAK $*"; }
has_canary() { grep -qaFf <(printf '%s\n' "$CANARY_LIST") "$@" 2>/dev/null; }

echo "probe" > own-marker && [ -f "$PWD/own-marker" ] && echo "OK own-file"
grep -q "^Pid:" "/proc/$$/status" 2>/dev/null && echo "OK own-process"

# The probe's own processes (it and its parents), whose command lines hold this text.
own=" "; pid=$$
while [ -n "$pid" ] && [ "$pid" -gt 0 ]; do
  own="$own$pid "
  pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
done
# The console's secrets in any environment or command line this process can read.
env | has_canary && leak "own environment"
for entry in /proc/[0-9]*; do
  for part in environ cmdline; do
    tr '\0' '\n' < "$entry/$part" 2>/dev/null | has_canary && leak "$entry/$part"
  done
  case "$own" in *" ${entry#/proc/} "*) continue ;; esac
  tr '\0' ' ' < "$entry/cmdline" 2>/dev/null | grep -qE "celery|$OTHER_MARKER" && leak "process $entry"
done
# The worker, by its PID, and a signal to it.
if [ -r "/proc/$WORKER_PID/cmdline" ] && grep -qa celery "/proc/$WORKER_PID/cmdline"; then
  leak "worker process visible"
  kill -0 "$WORKER_PID" 2>/dev/null && leak "worker signalled"
fi
# The data folder: the secret key file, the database, the broker's socket, other runs.
cat "$DATA_DIR/secret_key" 2>/dev/null && leak "secret_key file"
for name in console.sqlite3 test.sqlite3 redis.sock; do
  [ -e "$DATA_DIR/$name" ] && leak "data folder $name"
done
ls -A "$DATA_DIR" 2>/dev/null | grep -qv '^runs$' && leak "data folder listing: $(ls -A "$DATA_DIR")"
ls "$OTHER_RUN" >/dev/null 2>&1 && leak "other run folder $OTHER_RUN"
cat "$OTHER_RUN/work/secret.txt" 2>/dev/null && leak "other run file"
ls -d /tmp/loop-call-* 2>/dev/null && leak "other calls' private folders"
# The console's checkout (its settings, its manage.py), beyond its virtualenv.
[ -e "$CHECKOUT/manage.py" ] && leak "the console's checkout"
# A canary anywhere this process can read, outside the read-only system.
for folder in /etc /tmp /run /var "$HOME" "$PWD" "$DATA_DIR"; do
  has_canary -rs "$folder" && leak "a canary under $folder"
done
# Another run's tool socket, with the token stolen from it.
python3 - "$VICTIM_SOCKET" "$STOLEN_TOKEN" <<'PY' && leak "called another run's tool socket"
import json, socket, sys
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.sendall((json.dumps({"op": "list", "token": sys.argv[2]}) + "\n").encode())
    answer = json.loads(s.makefile().readline())
except (OSError, ValueError):
    sys.exit(1)
sys.exit(0 if answer.get("ok") else 1)
PY
echo "probe done"
