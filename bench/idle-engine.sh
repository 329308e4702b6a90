#!/bin/bash
# The idle engine's transactions on its own database (issue 33, point 4): a fresh database with
# log_statement = 'all', the engine started on it with its defaults and no Redis
# (`node -r ./test/support/swc-register.js src/main.ts`, what `npm start` runs built), left
# alone for SETTLE seconds, then pg_stat_database's xact_commit + xact_rollback (and sessions)
# read before and after MEASURE seconds; the breakdown is the server log's statements of that
# database over the same window. Needs psql and read access to the server log.
#
#   bench/idle-engine.sh [MEASURE=180] [SETTLE=60]
set -u
MEASURE=${1:-180}
SETTLE=${2:-60}
LOG=${PG_LOG:-/var/log/postgresql/postgresql-15-main.log}
DB=duraflow_idle_engine_$RANDOM
P="psql -h 127.0.0.1 -U postgres -Atq"
$P -c "CREATE DATABASE $DB"
$P -c "ALTER DATABASE $DB SET log_statement = 'all'"
cd "$(dirname "$0")/.."
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB PORT=0 GRPC_PORT=$((40000 + RANDOM % 20000)) \
  node -r ./test/support/swc-register.js src/main.ts > "/tmp/$DB.engine.log" 2>&1 &
ENGINE=$!
trap 'kill $ENGINE 2>/dev/null; sleep 3; $P -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"' EXIT
sleep "$SETTLE"
COUNT="SELECT xact_commit + xact_rollback, sessions FROM pg_stat_database WHERE datname = '$DB'"
BEFORE=$($P -c "$COUNT"); FROM=$(date -u +'%Y-%m-%d %H:%M:%S')
sleep "$MEASURE"
AFTER=$($P -c "$COUNT"); TO=$(date -u +'%Y-%m-%d %H:%M:%S')
TX=$(( ${AFTER%|*} - ${BEFORE%|*} ))
echo "idle engine, $FROM to $TO UTC: $TX transactions in $MEASURE s ($(( TX * 60 / MEASURE )) a minute); sessions ${BEFORE#*|} -> ${AFTER#*|}; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "statements in the server log over the same window, by kind:"
awk -v from="$FROM" -v to="$TO" -v db="@$DB " '{ at = $1 " " substr($2, 1, 8) } at >= from && at <= to && index($0, db) && /LOG: +(statement|execute)/' "$LOG" |
  sed -E 's/.*LOG: +(statement|execute [^:]*): *//' | cut -c1-60 | sort | uniq -c | sort -rn
