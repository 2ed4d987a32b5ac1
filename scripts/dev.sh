#!/usr/bin/env bash
# One entry point for a fresh checkout:
#   scripts/dev.sh demo   build virtual references from the bundled samples and verify them
#   scripts/dev.sh test   run the test suite (without the tests marked slow, unless CI or
#                         VIRTUALIZARR_FILL_ALL_TESTS is set)
#   scripts/dev.sh test-oldest
#                         run it with the oldest supported zarr, VirtualiZarr, xarray and
#                         Icechunk (.ci/oldest-constraints.txt), in .venv-oldest
#   scripts/dev.sh test-pre
#                         run it with the newest pre-releases of zarr, VirtualiZarr, xarray
#                         and Icechunk (pip --pre), in .venv-pre, and print one report line
#                         (the failing tests under it; the whole output in .venv-pre/pre-release.log)
#   scripts/dev.sh lint   ruff + mypy
#   scripts/dev.sh docs   build the documentation site (mkdocs build --strict, into site/);
#                         any warning (a broken link, an undocumented public name) fails
#   scripts/dev.sh ci     lint + docs + test + test-oldest, then test-pre, whose failures
#                         are reported without failing (what CI runs)
# Each finds a Python >= 3.12, creates .venv and installs the project into it when
# needed (again whenever pyproject.toml or the constraints change).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VIRTUALIZARR_FILL_VENV:-$ROOT/.venv}"
CONSTRAINTS="${VIRTUALIZARR_FILL_CONSTRAINTS:-}"

python_ok() {
    "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local candidate
    if [ -n "${PYTHON:-}" ]; then
        if python_ok "$PYTHON"; then echo "$PYTHON"; return 0; fi
        echo "PYTHON=$PYTHON is not a Python >= 3.12 with venv" >&2
        return 1
    fi
    for candidate in python3.13 python3.12 python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$(command -v "$candidate")"; then
            command -v "$candidate"; return 0
        fi
    done
    # pyenv, uv and similar keep interpreters outside PATH.
    for candidate in \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 \
        "$HOME"/.local/share/uv/python/cpython-3.1[2-9]*/bin/python3 \
        /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] /opt/python*/bin/python3; do
        if [ -x "$candidate" ] && python_ok "$candidate"; then echo "$candidate"; return 0; fi
    done
    echo "No Python >= 3.12 found. Install one (or set PYTHON=/path/to/python3.12)." >&2
    return 1
}

ensure_venv() {
    local digest stamp="$VENV/.installed-pyproject"
    local constrain=()
    if [ -n "$CONSTRAINTS" ]; then constrain=(-c "$CONSTRAINTS"); fi
    digest="$(cat "$ROOT/pyproject.toml" "$ROOT/codecs/pyproject.toml" \
        ${CONSTRAINTS:+"$CONSTRAINTS"} | cksum)"
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
        return 0
    fi
    if [ ! -x "$VENV/bin/python" ] || ! python_ok "$VENV/bin/python"; then
        local python
        python="$(find_python)"
        echo "Creating $VENV with $python ($("$python" --version 2>&1))" >&2
        rm -rf "$VENV"
        "$python" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    echo "Installing virtualizarr-fill, virtualizarr-fill-codecs and the test dependencies into $VENV" >&2
    # One resolver run over both: the codec distribution comes from ./codecs, so no
    # package index needs to hold it.
    "$VENV/bin/python" -m pip install --quiet "${constrain[@]}" \
        -e "$ROOT/codecs" -e "$ROOT[dev]" >&2
    echo "$digest" >"$stamp"
}

run_tests() {
    cd "$ROOT"
    local status=0 markers="not known_bug and not slow"
    # CI runs every test; a local run leaves out the slow ones (pytest -m slow runs them).
    if [ -n "${CI:-}" ] || [ -n "${VIRTUALIZARR_FILL_ALL_TESTS:-}" ]; then markers="not known_bug"; fi
    # One pytest worker per CPU, each taking whole test files (module fixtures stay in one
    # process); VIRTUALIZARR_FILL_TEST_WORKERS=0 runs in this process.
    "$VENV/bin/python" -m pytest -m "$markers" -n "${VIRTUALIZARR_FILL_TEST_WORKERS:-auto}" \
        --dist loadfile "$@" || status=$?
    # pytest's 5 means "no tests collected": that is a failure here.
    if [ "$status" -eq 5 ]; then echo "no tests were collected" >&2; return 1; fi
    return "$status"
}

run_pre_releases() {
    # The packages whose internals virtualizarr_fill/upstream.py adapts, at their newest
    # pre-releases: an upstream change shows here before it is released. The suite's
    # output goes to a log; one report line (and the failing tests) to stdout. Returns the
    # suite's status.
    local log="$VENV/pre-release.log" status=0 versions summary
    ensure_venv
    if ! "$VENV/bin/python" -m pip install --quiet --pre -U zarr virtualizarr xarray icechunk \
        >"$log" 2>&1; then
        echo "pre-release job: the pre-releases could not be installed (see $log)"
        return 1
    fi
    versions="$("$VENV/bin/python" -m pip list 2>/dev/null \
        | awk 'tolower($1) ~ /^(zarr|virtualizarr|xarray|icechunk)$/ {print $1 " " $2}' \
        | paste -sd, - | sed 's/,/, /g' || true)"
    run_tests "$@" >>"$log" 2>&1 || status=$?
    summary="$(grep -E '(passed|failed|error).* in [0-9.]+s' "$log" | tail -1 \
        | sed -E 's/^=+ //; s/ =+$//' || true)"
    if [ "$status" -eq 0 ]; then
        echo "pre-release job: ${summary:-passed} with $versions"
    else
        echo "pre-release job: ${summary:-the suite stopped with status $status} with $versions" \
            "(log: $log)"
        grep -E '^(FAILED|ERROR) ' "$log" | head -40 | sed 's/^/    /' || true
    fi
    return "$status"
}

run_lint() {
    cd "$ROOT"
    local paths=() path
    for path in virtualizarr_fill codecs tests examples fixtures benchmarks conformance scripts; do
        [ -e "$path" ] && paths+=("$path")
    done
    "$VENV/bin/ruff" check "${paths[@]}"
    "$VENV/bin/mypy"
}

run_docs() {
    cd "$ROOT"
    NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --site-dir "$ROOT/site" "$@"
}

command="${1:-}"
shift || true
case "$command" in
    demo) ensure_venv; cd "$ROOT"; exec "$VENV/bin/python" examples/demo.py "$@" ;;
    test) ensure_venv; run_tests "$@" ;;
    test-oldest)
        VENV="${VIRTUALIZARR_FILL_OLDEST_VENV:-$ROOT/.venv-oldest}"
        CONSTRAINTS="$ROOT/.ci/oldest-constraints.txt"
        ensure_venv; "$VENV/bin/python" -m pip list 2>/dev/null \
            | grep -iE '^(zarr|virtualizarr|xarray|icechunk) ' >&2 || true
        run_tests "$@" ;;
    test-pre)
        VENV="${VIRTUALIZARR_FILL_PRE_VENV:-$ROOT/.venv-pre}"
        run_pre_releases "$@" ;;
    lint) ensure_venv; run_lint ;;
    docs) ensure_venv; run_docs "$@" ;;
    ci)
        ensure_venv; run_lint; run_docs; run_tests "$@"; "$0" test-oldest "$@"
        "$0" test-pre "$@" || echo "pre-release job: not failing the build" ;;
    venv) ensure_venv; echo "$VENV" ;;
    *) echo "usage: scripts/dev.sh {demo|test|test-oldest|test-pre|lint|docs|ci} [args...]" >&2; exit 2 ;;
esac
