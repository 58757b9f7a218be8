# Lily: one plain Makefile.
#
#   make                 build/lily (with the CUDA backend when nvcc is found; CUDA=0 to leave it out)
#   make check           the README's test command: make test, then make test SAN=1
#   make test            build and run every CPU test (unit tests, model fixtures, CLI and server tests)
#   make test SAN=1      the same under AddressSanitizer + UndefinedBehaviorSanitizer (build-san/)
#   make test-gpu        on a machine with an NVIDIA GPU: kernels vs CPU references, end-to-end logits
#   make fuzz            build the libFuzzer targets (clang) and run each for FUZZ_SECONDS
#   make format          clang-format every source file
#
# Knobs: CUDA=0|1, SAN=1, ARCH=<-march value>, NVCC=<path>, CUDA_HOME=<path>, NVEXTRA=<nvcc flags>
# (compile-time experiments, e.g. NVEXTRA=-DGC_SPLIT=0; the flags stamp rebuilds what they change),
# TRACE=1 (decode kernels write clock stamps for `lily-gpu-test chain`; builds into build-trace/).

CC      ?= gcc
ARCH    ?= x86-64-v3
PKGS    := jansson libmicrohttpd oniguruma libutf8proc
SAN     ?= 0

TRACE   ?= 0
ifeq ($(SAN),1)
  BUILD   := build-san
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  OPT     := -O1 -g
  CUDA    := 0
else
  BUILD   := build
  SANFLAGS :=
  OPT     := -O3 -g
endif
ifeq ($(TRACE),1)
  BUILD   := build-trace
endif

NVCC      ?= $(shell command -v nvcc 2>/dev/null)
CUDA_HOME ?= $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(realpath $(NVCC))),/usr/local/cuda)
ifeq ($(NVCC),)
  CUDA ?= 0
else
  CUDA ?= 1
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

CFLAGS  := -std=c11 $(OPT) -march=$(ARCH) -Wall -Wextra -Werror -D_GNU_SOURCE -pthread \
           -MMD -MP -Isrc $(PKG_CFLAGS) $(SANFLAGS)
LDFLAGS := -pthread $(SANFLAGS)
LDLIBS  := $(PKG_LIBS) -lm

SRC      := $(wildcard src/*.c src/cpu/*.c src/server/*.c)
LIB_SRC  := $(filter-out src/main.c,$(SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)

ifeq ($(CUDA),1)
  CU_SRC   := $(wildcard src/cuda/*.cu)
  CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.o)
  NVFLAGS  := -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo -Isrc \
              -Xcompiler -Wall,-Wextra,-Werror -MMD -MP $(NVEXTRA)
  ifeq ($(TRACE),1)
    NVFLAGS += -DLILY_TRACE=1
  endif
  CFLAGS   += -DLILY_CUDA=1
  LDLIBS   += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lstdc++
else
  CU_OBJ   :=
endif

TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

# Objects depend on a stamp of the flags, so switching CUDA=0/1 or SAN rebuilds what it changes.
FLAGS_STAMP := $(BUILD)/.flags
$(shell mkdir -p $(BUILD); echo '$(CFLAGS) $(NVFLAGS) $(CUDA)' | cmp -s - $(FLAGS_STAMP) || echo '$(CFLAGS) $(NVFLAGS) $(CUDA)' > $(FLAGS_STAMP))

.PHONY: all check test test-gpu fuzz format clean
all: $(BUILD)/lily $(BUILD)/dev/sampler_bench $(if $(filter 1,$(CUDA)),$(BUILD)/lily-gpu-test $(BUILD)/dev/persist $(BUILD)/dev/persist_gv2 $(BUILD)/dev/mma_rate $(BUILD)/dev/qgemm_sm $(BUILD)/dev/cluster_probe)

$(BUILD)/liblily.a: $(LIB_OBJ) $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/lily: $(BUILD)/src/main.o $(BUILD)/liblily.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The sampler's softmax over the vocabulary vectorises only when FP compares and conversions may be
# if-converted (no FP exception semantics: nothing here reads the exception flags).
$(BUILD)/src/sampler.o: CFLAGS += -fno-trapping-math

$(BUILD)/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/liblily.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/liblily.a $(LDFLAGS) $(LDLIBS) $(shell pkg-config --libs cmocka)

# The README's test command: the whole CPU suite, then again under ASan+UBSan.
check:
	$(MAKE) -j2 all
	$(MAKE) -j2 test
	$(MAKE) -j2 test SAN=1

# Every test binary, then the script tests; stops at the first failure and exits non-zero.
test: $(BUILD)/lily $(TEST_BIN)
	@BUILD=$(BUILD) LILY_PY=$${LILY_PY:-$$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)} ./tests/run_all.sh

# GPU test binary: kernels vs CPU references, end-to-end on random models (tests/gpu/*.cu).
GPU_TEST_OBJ := $(patsubst %.cu,$(BUILD)/%.o,$(wildcard tests/gpu/*.cu))
$(BUILD)/lily-gpu-test: $(GPU_TEST_OBJ) $(BUILD)/liblily.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# dev/ prototypes (built so that CI keeps compiling them; run by hand on the GPU machine).
$(BUILD)/dev/sampler_bench: dev/tools/sampler_bench.c $(BUILD)/liblily.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)
$(BUILD)/dev/persist: dev/persist/persist.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -Xcompiler -fopenmp -o $@ $<
$(BUILD)/dev/persist_gv2.o: dev/persist/persist_gv2.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<
$(BUILD)/dev/persist_gv2: $(BUILD)/dev/persist_gv2.o $(BUILD)/liblily.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/dev/mma_rate: dev/mma/mma_rate.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $<
$(BUILD)/dev/cluster_probe: dev/cluster/probe.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -o $@ $<
$(BUILD)/dev/qgemm_sm.o: dev/qgemm_sm/qgemm_sm.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<
$(BUILD)/dev/qgemm_sm: $(BUILD)/dev/qgemm_sm.o $(BUILD)/liblily.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

test-gpu: $(BUILD)/lily $(if $(filter 1,$(CUDA)),$(BUILD)/lily-gpu-test)
	@BUILD=$(BUILD) ./tests/run_gpu.sh

fuzz:
	@$(MAKE) -f tests/fuzz/Makefile.fuzz FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60)

format:
	clang-format -i $(wildcard src/*.[ch] src/*/*.[ch] src/cuda/*.cu src/cuda/*.cuh tests/*.[ch])

clean:
	rm -rf build build-san

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
