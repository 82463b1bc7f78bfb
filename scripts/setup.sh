#!/usr/bin/env bash
# Idempotent set-up: virtualenv with the pinned dependencies, a reachable MariaDB/MySQL
# and Redis (installed and started from Debian packages when running as root), the
# database, and the schema at Alembic head; with the dev extra, faketime and Chromium for
# the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
VENV=.venv
DB_HOST=127.0.0.1
DB_PORT=3306
REDIS_PORT=6379
EXTRAS="${EMS_SETUP_EXTRAS:-dev,spark}"
JDBC_JAR=/usr/share/java/mariadb-java-client.jar
CHROMIUM=/usr/bin/chromium

say() { printf '[setup] %s\n' "$*"; }
is_root() { [ "$(id -u)" = 0 ]; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() {
    for _ in $(seq 1 60); do port_open "$1" "$2" && return 0; sleep 0.5; done
    return 1
}

apt_install() {
    # Another apt run (a second set-up, unattended upgrades) holds the dpkg lock: wait for it.
    local wait=(-o DPkg::Lock::Timeout=300)
    if [ ! -f /tmp/.ems-apt-updated ]; then
        apt-get "${wait[@]}" update -qq && touch /tmp/.ems-apt-updated
    fi
    DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq "$@" >/dev/null
}

ensure_python() {
    if ! command -v "$PYTHON" >/dev/null; then
        say "$PYTHON not found; install Python 3.11 (Debian: apt-get install python3.11 python3.11-venv)"
        exit 1
    fi
    local stamp="$VENV/.installed-$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)-$EXTRAS"
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
            # Debian splits venv support into its own package.
            rm -rf "$VENV"
            is_root || { say "run: apt-get install python3.11-venv"; exit 1; }
            apt_install python3.11-venv
            "$PYTHON" -m venv "$VENV"
        fi
    fi
    if [ ! -f "$stamp" ]; then
        say "installing pinned dependencies ($EXTRAS)"
        install_dependencies
        rm -f "$VENV"/.installed-*
        touch "$stamp"
    fi
}

install_dependencies() {
    # uv, pinned in the lock, installs the lock's exact versions in a few seconds
    # (pip takes most of a minute to resolve and install the same set).
    "$VENV/bin/pip" install -q --disable-pip-version-check "$(grep -m1 '^uv==' requirements.lock)"
    local uv=("$VENV/bin/uv" pip install -q --python "$VENV/bin/python")
    if [ "$EXTRAS" = dev,spark ]; then
        "${uv[@]}" --no-deps -r requirements.lock
        "${uv[@]}" --no-deps -e .
    else
        "${uv[@]}" -c requirements.lock -e ".[$EXTRAS]"
    fi
}

ensure_mariadb() {
    port_open "$DB_HOST" "$DB_PORT" && return 0
    if ! is_root; then
        say "no MySQL server on $DB_HOST:$DB_PORT. As root run: apt-get install mariadb-server &&"
        say "  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
        say "or point EMS_DATABASE_URL at a running MySQL 8 / MariaDB 10.6+ server."
        exit 3
    fi
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || { say "installing MariaDB"; apt_install mariadb-server; }
    say "starting MariaDB"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
    wait_port "$DB_HOST" "$DB_PORT" || { say "MariaDB did not come up"; exit 3; }
}

ensure_redis() {
    port_open 127.0.0.1 "$REDIS_PORT" && return 0
    if ! is_root; then
        say "no Redis on 127.0.0.1:$REDIS_PORT. As root run: apt-get install redis-server &&"
        say "  redis-server --daemonize yes --bind 127.0.0.1 --port $REDIS_PORT --save '' --appendonly no"
        exit 3
    fi
    command -v redis-server >/dev/null || { say "installing Redis"; apt_install redis-server; }
    say "starting Redis"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ems.log
    wait_port 127.0.0.1 "$REDIS_PORT" || { say "Redis did not come up"; exit 3; }
}

ensure_jdbc_driver() {
    # The Spark jobs read MySQL through MariaDB Connector/J (EMS_JDBC_JAR overrides it).
    [ -n "${EMS_JDBC_JAR:-}" ] && [ -f "$EMS_JDBC_JAR" ] && return 0
    [ -f "$JDBC_JAR" ] && return 0
    if ! is_root; then
        say "no JDBC driver at $JDBC_JAR for the Spark jobs. As root run: apt-get install libmariadb-java"
        say "  (or set EMS_JDBC_JAR to a MariaDB or MySQL Connector/J jar)"
        return 0
    fi
    say "installing the MariaDB JDBC driver"
    apt_install libmariadb-java
}

ensure_java() {
    command -v java >/dev/null && return 0
    if ! is_root; then
        say "no Java runtime for the Spark jobs. As root run: apt-get install openjdk-17-jre-headless"
        return 0
    fi
    say "installing Java 17"
    apt_install openjdk-17-jre-headless
}

# The fault suite runs a member with its clock skewed (libfaketime, LD_PRELOAD).
ensure_faketime() {
    ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 && return 0
    if ! is_root; then say "run: apt-get install faketime (the fault suite needs it)"; exit 1; fi
    say "installing faketime"
    apt_install faketime
}

# The ha suite and the HA report run Galera's arbitrator (garbd) beside the cluster.
ensure_garbd() {
    command -v garbd >/dev/null && return 0
    if ! is_root; then say "run: apt-get install galera-arbitrator-4 (the ha suite needs it)"; exit 1; fi
    say "installing Galera's arbitrator"
    apt_install galera-arbitrator-4
}

# The cost model (make bench SUITES=cost) counts instructions per message under valgrind.
ensure_valgrind() {
    command -v valgrind >/dev/null && return 0
    if ! is_root; then say "run: apt-get install valgrind (the cost model counts with it)"; exit 1; fi
    say "installing valgrind"
    apt_install valgrind
}

# The browser tests (tests/browser) drive Debian's Chromium with Playwright; without it
# they skip, saying so.
ensure_chromium() {
    [ -x "$CHROMIUM" ] && return 0
    if ! is_root; then
        say "no $CHROMIUM: the browser tests (tests/browser) will skip. As root run: apt-get install chromium"
        return 0
    fi
    say "installing Chromium (for the browser tests)"
    apt_install chromium
}

ensure_database() {
    "$VENV/bin/python" -m ems.cli db create --quiet
    "$VENV/bin/python" -m ems.cli db upgrade --quiet
    say "the database server's innodb_buffer_pool_size: $(buffer_pool_mb) MB" \
        "(for a deployment, see docs/operations.md: Sizing the buffer pool)"
}

buffer_pool_mb() {
    "$VENV/bin/python" - <<'PY'
from sqlalchemy import create_engine, text

from ems.config import Settings

engine = create_engine(Settings.from_env().database_url)
with engine.connect() as conn:
    size = conn.execute(text("SELECT @@innodb_buffer_pool_size")).scalar_one()
engine.dispose()
print(int(size) // 1048576)
PY
}

ensure_python
case ",$EXTRAS," in *,spark,*) ensure_java; ensure_jdbc_driver ;; esac
ensure_mariadb
ensure_redis
case ",$EXTRAS," in *,dev,*) ensure_faketime; ensure_garbd; ensure_valgrind; ensure_chromium ;; esac
if [ "${EMS_SETUP_SKIP_DB:-}" != 1 ]; then ensure_database; fi
say "ready"
