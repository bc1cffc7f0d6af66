#!/bin/sh
# run.sh — build and run the libFuzzer harnesses for the model file parsers.
# Usage: tests/fuzz/run.sh   (from the repo root; env: BUILD=build-fuzz, FUZZ_SECONDS=60,
# CLANG=clang). Each harness runs FUZZ_SECONDS on a corpus seeded from tests/fuzz/corpus/
# (plus the first 64 KB of stories260K.gguf) with tests/fuzz/corpus/NAME.dict; crashes land in $BUILD/crash-<harness>-*.
# Prints "fuzz: N passed, N failed" and exits non-zero if any harness found anything.
set -u
BUILD=${BUILD:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CLANG=${CLANG:-clang}
FLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
SRC_BASE="src/base/check.c src/base/dtype.c"
STORIES=../shared/models/stories260K.gguf
mkdir -p "$BUILD"
n_pass=0
n_fail=0

# run_one NAME MAX_LEN SOURCES...
run_one() {
    name=$1; max_len=$2; shift 2
    corpus="$BUILD/corpus_$name"
    mkdir -p "$corpus"
    if ! $CLANG $FLAGS "tests/fuzz/fuzz_$name.c" "$@" $SRC_BASE -ljansson -lm \
            -o "$BUILD/fuzz_$name"; then
        echo "fuzz_$name: build failed"
        n_fail=$((n_fail + 1))
        return
    fi
    cp tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null
    if [ "$name" = gguf ] && [ -f "$STORIES" ]; then
        head -c 65536 "$STORIES" > "$corpus/stories260K_64k.gguf"
    fi
    dict=""
    [ -f "tests/fuzz/corpus/$name.dict" ] && dict="-dict=tests/fuzz/corpus/$name.dict"
    if "$BUILD/fuzz_$name" -max_total_time="$FUZZ_SECONDS" -max_len="$max_len" $dict \
            -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$BUILD/crash-$name-" "$corpus" > "$BUILD/fuzz_$name.log" 2>&1; then
        echo "fuzz_$name: ok ($(ls "$corpus" | wc -l) corpus files," \
             "$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/fuzz_$name.log" |
                grep -o '[0-9]*$') runs)"
        n_pass=$((n_pass + 1))
    else
        echo "fuzz_$name: FAILED (see $BUILD/fuzz_$name.log)"
        tail -n 30 "$BUILD/fuzz_$name.log"
        n_fail=$((n_fail + 1))
    fi
}

run_one gguf 65536 src/model/gguf.c src/model/weights_mem.c
run_one safetensors 8192 src/model/safetensors.c src/model/weights_mem.c
echo "fuzz: $n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
