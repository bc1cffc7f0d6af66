# octet — one Makefile. `make` builds build/octet; `make test` runs the quick tier;
# `make test-full` rebuilds under ASan+UBSan (build-san/) and fuzzes the file parsers.
# CUDA=1 is reserved for the CUDA backend (src/backend/cuda/), added by a later issue.

BUILD   ?= build
CC      ?= cc
OPT     ?= -O2 -march=native
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fno-math-errno -Wall -Wextra -Wno-unused-parameter -pthread -MMD -MP
LDLIBS  += -lcurl -lmicrohttpd -ljansson -lpcre2-8 -lm -pthread
SAN     ?=
ifeq ($(SAN),1)
  BUILD   := build-san
  OPT     := -O1 -fno-omit-frame-pointer
  CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC  := $(filter-out src/main.c,$(shell find src -name '*.c' | sort))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all test test-full deps clean fuzz
all: $(BUILD)/octet

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/liboctet.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/octet: $(BUILD)/obj/src/main.o $(BUILD)/liboctet.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/liboctet.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/liboctet.a -o $@ $(LDLIBS)

test: $(BUILD)/octet $(TEST_BIN)
	@BUILD=$(BUILD) bash tests/run_all.sh

test-full:
	$(MAKE) SAN=1 test
	$(MAKE) fuzz

# libFuzzer harnesses (clang), each run for FUZZ_SECONDS on its seed corpus.
FUZZ_SECONDS ?= 60
fuzz:
	@BUILD=build-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh

deps:
	bash scripts/deps.sh

clean:
	rm -rf build build-san build-fuzz

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/src/main.d
