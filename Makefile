# octet — one Makefile. `make` builds build/octet; `make test` runs the quick tier;
# `make test-full` rebuilds under ASan+UBSan (build-san/), runs the threaded parts under TSan
# (build-tsan/) and fuzzes the file parsers.
# `make CUDA=1` builds build-cuda/octet: the same program with the CUDA backend added
# (src/backend/cuda/*.cu, nvcc, sm_90a); `--device cpu|cuda` picks one at run time.

# a CUDA build has its own folder (build-cuda/), so that CPU and CUDA builds live side by side and
# switching between them rebuilds nothing
ifeq ($(CUDA),1)
  BUILD ?= build-cuda
endif
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

# `make CUDA=1 bundle`: the binaries for a GPU machine without the Debian libraries (scripts/bundle.sh):
# build-bundle/, a portable x86-64 level instead of this machine's, an $ORIGIN rpath to the bundled lib/
ifeq ($(BUNDLE),1)
  BUILD   := build-bundle
  OPT     := -O2 -march=x86-64-v3
  LDFLAGS += -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/lib:$$ORIGIN/../lib'  # (DT_RPATH: also the libraries' own dependencies)
endif

LIB_SRC  := $(filter-out src/main.c,$(shell find src -name '*.c' | sort))
CUDA    ?=
CUDA_HOME ?= /usr/local/cuda
NVCC    ?= $(CUDA_HOME)/bin/nvcc
NVCCFLAGS ?= -O3 -lineinfo -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra,-Wno-unused-parameter
# `make CUDA=1 STEP_TIMING=1`: the CUDA backend times each replayed decode step (instrumentation,
# printed when the backend is destroyed; src/backend/cuda/cuda_step.cu). Use a BUILD folder of its own:
# objects are not rebuilt when the option changes.
ifeq ($(STEP_TIMING),1)
  NVCCFLAGS += -DCUDA_STEP_TIMING
endif
ifeq ($(CUDA),1)
  LIB_SRC := $(filter-out src/backend/cuda_none.c,$(LIB_SRC))
  CU_SRC  := $(sort $(shell find src -name '*.cu'))
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++
endif
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
# the archive is rebuilt whenever the configuration (CUDA on/off) changes
CONFIG_STAMP := $(BUILD)/config.cuda$(CUDA)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all test test-full test-tsan deps clean fuzz gpu-tests lint bundle
all: $(BUILD)/octet

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# (-MMD -MP: a .cu object depends on every header it includes, the C ones under src/ too)
$(BUILD)/obj/%.o: %.cu $(wildcard src/backend/cuda/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(CONFIG_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/config.cuda*
	@touch $@

$(BUILD)/liboctet.a: $(LIB_OBJ) $(CONFIG_STAMP)
	@rm -f $@
	ar rcs $@ $(LIB_OBJ)

# `octet --version` names the commit the binary was built from (with -dirty for local edits),
# so results recorded on another machine can be traced to their source
OCTET_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- src Makefile 2>/dev/null || echo -dirty)
.PHONY: FORCE
$(BUILD)/version.h: FORCE   # rewritten only when the commit changes, so main.o rebuilds only then
	@mkdir -p $(BUILD)
	@echo '#define OCTET_COMMIT "$(OCTET_COMMIT)"' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@
	@rm -f $@.tmp
$(BUILD)/obj/src/main.o: src/main.c $(BUILD)/version.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD) -c $< -o $@

$(BUILD)/octet: $(BUILD)/obj/src/main.o $(BUILD)/liboctet.a
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/liboctet.a tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/liboctet.a -o $@ $(LDLIBS)

# GPU tests (tests/gpu/*.c): built with CUDA=1, run on the GPU machine by scripts/gpu_check.sh
GPU_TEST_BIN := $(patsubst tests/gpu/%.c,$(BUILD)/gpu/%,$(wildcard tests/gpu/*.c))
# dev/cuda/*.cu: standalone probes (e.g. the wgmma accumulation probe), built beside them
DEV_CUDA_BIN := $(patsubst dev/cuda/%.cu,$(BUILD)/gpu/%,$(wildcard dev/cuda/*.cu))
gpu-tests: $(BUILD)/octet $(GPU_TEST_BIN) $(DEV_CUDA_BIN)
$(BUILD)/gpu/%: dev/cuda/%.cu $(wildcard src/backend/cuda/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $< -o $@ $(LAB_LIBS)
# the labs that call cuBLASLt
$(BUILD)/gpu/fp8_gemm_rate: LAB_LIBS = -lcublasLt
$(BUILD)/gpu/%: tests/gpu/%.c $(BUILD)/liboctet.a tests/test.h $(wildcard tests/gpu/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/liboctet.a -o $@ $(LDLIBS)

bundle:
	$(MAKE) BUNDLE=1 $(if $(filter 1,$(CUDA)),gpu-tests,all)
	bash scripts/bundle.sh build-bundle

test: $(BUILD)/octet $(TEST_BIN)
	@BUILD=$(BUILD) bash tests/run_all.sh

test-full:
	$(MAKE) SAN=1 test
	$(MAKE) test-tsan
	$(MAKE) fuzz

# the engine tests and the server's load test under ThreadSanitizer (build-tsan/)
test-tsan:
	$(MAKE) BUILD=build-tsan OPT="-O1 -fsanitize=thread" LDFLAGS=-fsanitize=thread build-tsan/octet build-tsan/tests/test_engine
	@bash tests/race/tsan_tier.sh build-tsan

# libFuzzer harnesses (clang), each run for FUZZ_SECONDS on its seed corpus.
FUZZ_SECONDS ?= 60
fuzz:
	@BUILD=build-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh

# the house rules (scripts/lint.sh): no session/call history in tracked text, no OCTET_* environment
# reads in src/, src/ lines <= 120 columns and files <= 800 lines
lint:
	@bash scripts/lint.sh

deps:
	bash scripts/deps.sh

clean:
	rm -rf build build-san build-tsan build-fuzz build-bundle

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/src/main.d $(TEST_BIN:=.d)
