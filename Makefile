# staticnn: Kbuild-style build.
#
#   make help                 every target
#   make host_defconfig       (or make defconfig_host) write .config from configs/
#   make menuconfig           edit .config
#   make                      build ./app/mnist for the configured target
#   make O=DIR ...            keep .config and every output under DIR
#   make V=1                  show the commands

O ?= .
override O := $(patsubst %/,%,$(O))
export KCONFIG_CONFIG := $(O)/.config

ifeq ($(V),1)
Q :=
else
Q := @
endif

# kconfiglib: Debian's python3-kconfiglib lives under /usr/bin/python3, pip's
# under whichever python3 comes first. Take the first that has it.
PYTHON := $(firstword $(foreach p,python3 /usr/bin/python3,$(if $(shell $(p) -c 'import kconfiglib' 2>/dev/null && echo y),$(p))))
KCONFIG = $(if $(PYTHON),$(PYTHON) tools/make/kconfig.py,$(error kconfiglib not found: run 'apt-get install python3-kconfiglib' (or 'pip install kconfiglib')))

NVCC ?= $(firstword $(shell command -v nvcc) $(wildcard /usr/local/cuda/bin/nvcc))
BOARDS := $(patsubst configs/%_defconfig,%,$(wildcard configs/*_defconfig))
# Renamed boards, OLD:NEW: the old names still configure the new board, with
# a note, for one release. They are not boards (no file in configs/).
BOARD_ALIASES := h100_mlp128_b64:h100_128x1_b64 h100_mlp784x4_b64:h100_784x4_b64 \
                 h100_h128_b32:h100_128x3_b32 h100_h1024_b32:h100_1024x3_b32 h100_h8192_b32:h100_8192x3_b32
board-alias-old := $(foreach a,$(BOARD_ALIASES),$(firstword $(subst :, ,$(a))))
board-renamed = $(word 2,$(subst :, ,$(filter $(1):%,$(BOARD_ALIASES))))

config-targets := defconfig menuconfig savedefconfig olddefconfig help clean distclean data run test check test-full \
                  plot tune \
                  $(addsuffix _defconfig,$(BOARDS)) $(addprefix defconfig_,$(BOARDS)) %_defconfig defconfig_%
build-goals := $(filter-out $(config-targets),$(MAKECMDGOALS))
config-goals := $(filter $(config-targets) %_defconfig defconfig_%,$(MAKECMDGOALS))

.DEFAULT_GOAL := all
.PHONY: all test-programs test check test-full run data plot tune defconfig menuconfig savedefconfig olddefconfig help clean distclean FORCE

ifneq ($(and $(config-goals),$(build-goals)),)
# 'make host_defconfig all': run each goal on its own, in order, as Kbuild does.
$(MAKECMDGOALS): __sequential
	@:
.PHONY: __sequential
__sequential:
	$(Q)set -e; for g in $(MAKECMDGOALS); do $(MAKE) --no-print-directory $$g; done
else

# ---- configuration -----------------------------------------------------------

%_defconfig:
	$(Q)mkdir -p $(O)
	$(Q)$(KCONFIG) defconfig configs/$@

# An old board name: one note, then the board it was renamed to.
$(addsuffix _defconfig,$(board-alias-old)):
	@echo 'note: board $(@:_defconfig=) was renamed to $(call board-renamed,$(@:_defconfig=)) (the old name goes in the next release)' >&2
	$(Q)mkdir -p $(O)
	$(Q)$(KCONFIG) defconfig configs/$(call board-renamed,$(@:_defconfig=))_defconfig

# Any minimal config file: make defconfig DEFCONFIG=path/to/file
DEFCONFIG ?= configs/host_defconfig
defconfig:
	$(Q)mkdir -p $(O)
	$(Q)$(KCONFIG) defconfig $(DEFCONFIG)

defconfig_%:
	$(Q)$(MAKE) --no-print-directory $*_defconfig

menuconfig:
	$(Q)mkdir -p $(O)
	$(Q)$(KCONFIG) menuconfig

savedefconfig:
	$(Q)$(KCONFIG) savedefconfig $(O)/defconfig

olddefconfig:
	$(Q)$(KCONFIG) olddefconfig

# The dataset of the .config (or DATASET=mnist|fashion-mnist), fetched into
# its own directory under the .config's CONFIG_DATA_ROOT.
config-value = $(shell sed -n 's/^CONFIG_$(1)=\(.*\)/\1/p' $(KCONFIG_CONFIG) 2>/dev/null)
data-set = $(or $(DATASET),$(if $(filter y,$(call config-value,DATASET_FASHION_MNIST)),fashion-mnist,mnist))
# The root as the .config writes it, quotes dropped and escapes undone; it reaches the script through the
# environment, never through the shell's parsing of the recipe.
data-root = $(or $(shell sed -n 's/^CONFIG_DATA_ROOT="\(.*\)"$$/\1/p' $(KCONFIG_CONFIG) 2>/dev/null | \
                         sed 's/\\\(.\)/\1/g'),data)
FETCH ?= tools/make/fetch_data.sh
data: export SNN_DATA_DEST = $(data-root)/$(data-set)
data:
	$(Q)$(FETCH) --dataset $(data-set) --dest "$$SNN_DATA_DEST"

# 'make run': the whole main job on the machine at hand.
run:
	$(Q)O=$(O) tools/make/run.sh

test:
	$(Q)tests/run.sh --tier test

check:
	$(Q)tests/run.sh --tier check

test-full:
	$(Q)tests/run.sh --tier full

# 'make plot LOG="a.jsonl b.jsonl"': the runs' curves and confusion matrices,
# by the first python3 that has matplotlib (Debian's python3-matplotlib lives
# under /usr/bin/python3).
PLOT_OUT ?= $(patsubst ./%,%,$(O)/build/plots)
PLOT_PYTHON = $(firstword $(foreach p,python3 /usr/bin/python3,$(if $(shell $(p) -c 'import matplotlib' 2>/dev/null && echo y),$(p))))
plot:
	$(if $(LOG),,$(error usage: make plot LOG="run.jsonl ..." [PLOT_OUT=dir]: plots mnist --log files into $(PLOT_OUT)))
	$(Q)$(or $(PLOT_PYTHON),$(error matplotlib not found: run 'apt-get install python3-matplotlib' (or tools/setup.sh))) \
		tools/plot.py --out $(PLOT_OUT) $(LOG)

# 'make tune BOARD=NAME': the autotuner on the GPUs present (tools/make/tune.py).
TUNE_BUDGET ?= 300
tune:
	$(if $(BOARD),,$(error usage: make tune BOARD=NAME [TUNE_BUDGET=seconds] [TUNE_GPUS=all|N|ids]: tunes configs/NAME_defconfig on the GPUs present; writes configs/NAME_tuned_defconfig where something beats it))
	$(Q)$(KCONFIG:tools/make/kconfig.py=tools/make/tune.py) --board $(BOARD) --budget $(TUNE_BUDGET) $(if $(TUNE_GPUS),--gpus $(TUNE_GPUS))

help:
	@echo 'Configuration:'
	@echo '  menuconfig        edit $(KCONFIG_CONFIG) in a terminal UI (kconfiglib)'
	@echo '  <board>_defconfig write $(KCONFIG_CONFIG) from configs/<board>_defconfig'
	@echo '  defconfig_<board> the same'
	@echo '  defconfig         write $(KCONFIG_CONFIG) from DEFCONFIG=FILE (default configs/host_defconfig)'
	@echo '  olddefconfig      bring $(KCONFIG_CONFIG) up to date, new symbols at their defaults'
	@echo '  savedefconfig     write the minimal config to $(O)/defconfig'
	@echo '  boards: $(BOARDS)'
	@echo '  renamed boards (old names accepted until the next release): $(subst :,->,$(BOARD_ALIASES))'
	@echo 'Build and run:'
	@echo '  all (default)     build $(O)/app/mnist for the configured target'
	@echo '  data              fetch the dataset (DATASET=mnist|fashion-mnist)'
	@echo '  run               pick a defconfig for this machine if there is no .config,'
	@echo '                    fetch the data, build and train'
	@echo "  check             the edit-build-test loop's tests ($$(tests/run.sh --estimate check))"
	@echo "  test              every test that guards behaviour, one CUDA build and GPU variant per code"
	@echo "                    path ($$(tests/run.sh --estimate test))"
	@echo "  test-full         the whole matrix: every board, every GPU variant, long fuzzing"
	@echo "                    ($$(tests/run.sh --estimate full))"
	@echo '  tune              BOARD=NAME [TUNE_BUDGET=300] [TUNE_GPUS=all]: time GEMM tiles and paths for the'
	@echo '                    board on the GPUs present; writes docs/tune/NAME.md, and'
	@echo '                    configs/NAME_tuned_defconfig where something beats the board'
	@echo '  plot              LOG="a.jsonl b.jsonl": loss, accuracy and confusion plots of mnist --log'
	@echo '                    files into PLOT_OUT (default $(PLOT_OUT))'
	@echo '  clean             remove objects and programs'
	@echo '  distclean         also remove .config and the generated headers'
	@echo 'Variables: O=DIR (output directory), V=1 (show commands),'
	@echo '  SANITIZE=address,undefined (build the C sources with those sanitizers; best with O=DIR)'

clean:
	$(Q)rm -rf $(O)/build $(O)/app/mnist $(O)/tests/bin $(O)/tools/bin

distclean: clean
	$(Q)rm -rf $(O)/include/generated $(O)/include/config $(KCONFIG_CONFIG) $(O)/defconfig

# ---- build -------------------------------------------------------------------

ifneq ($(build-goals)$(if $(MAKECMDGOALS),,all),)

AUTOCONF := $(O)/include/config/auto.conf
CONFIG_H := $(O)/include/generated/config.h
# The Kconfig files by name, not */*/Kconfig: that pattern would read (and make
# would cache) the listing of include/generated before genconfig writes there.
KCONFIG_FILES := Kconfig $(wildcard */Kconfig */Kconfig.* arch/*/Kconfig kernels/*/Kconfig kernels/*/Kconfig.*)

ifeq ($(wildcard $(KCONFIG_CONFIG)),)
$(error no $(KCONFIG_CONFIG): run 'make host_defconfig' (or 'make <board>_defconfig', see 'make help') or 'make menuconfig')
endif

# Regenerated whenever .config or a Kconfig is newer, while the makefile is
# read: a refused config stops make with its one message (a rule would be
# followed by make's own "No rule to make target" line). The header is
# rewritten only when its contents change, so the objects that depend on it
# rebuild exactly then.
# (test -f, not $(wildcard): make caches the listings wildcard reads, and a
# listing read before genconfig would hide the header it writes.)
config-stale := $(shell test -f $(AUTOCONF) -a -f $(CONFIG_H) && \
                  find $(KCONFIG_CONFIG) $(KCONFIG_FILES) tools/make/kconfig.py -newer $(AUTOCONF) | head -n 1 || echo stale)
ifneq ($(config-stale),)
genconfig := $(shell KCONFIG_CONFIG=$(KCONFIG_CONFIG) $(KCONFIG) genconfig $(O) 2>&1 && touch $(AUTOCONF) && echo genconfig-ok)
ifeq ($(filter genconfig-ok,$(genconfig)),)
$(error $(genconfig))
endif
$(if $(filter GEN,$(genconfig)),$(info $(strip)  GEN     $(CONFIG_H)))
# Said at configure time (tools/make/kconfig.py): a data-parallel build predicted not to pay (dp_warning),
# hidden widths that keep the GEMMs off the 16-bit twins (width_warning).
$(foreach w,dp width,$(if $(shell cat $(O)/include/generated/$(w)_warning.txt 2>/dev/null),\
    $(warning warning: $(shell cat $(O)/include/generated/$(w)_warning.txt))))
endif
include $(AUTOCONF)

BUILD := $(O)/build
include app/Kbuild arch/Kbuild data/Kbuild kernels/Kbuild mm/Kbuild nn/Kbuild tests/Kbuild tools/lab/Kbuild

CC ?= cc
# The tools the build runs (fixdep): never sanitized or cross-compiled.
HOSTCC ?= cc
WARN := -Wall -Wextra -Wformat=2 $(EXTRA_WARN)
CPPFLAGS := -I$(O)/include -Iinclude -I. -MMD -MP
# SANITIZE=address,undefined: the C sources (all of the host target) built
# and linked with those sanitizers.
SANITIZE_FLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
CFLAGS := -std=c11 -O3 -march=native -D_POSIX_C_SOURCE=200809L $(WARN) $(if $(CONFIG_HOST_OPENMP),-fopenmp) \
          $(SANITIZE_FLAGS)
# Packaged libraries: zlib (gzip IDX), cJSON (safetensors headers, JSON
# output), libpng (--predict images).
LIBS := -lcjson -lpng -lz -lm
LDLIBS := $(LIBS) $(if $(CONFIG_HOST_OPENMP),-fopenmp) $(SANITIZE_FLAGS)

ifeq ($(CONFIG_TARGET_CUDA),y)
ifeq ($(NVCC),)
$(error nvcc not found: install the CUDA toolkit or set NVCC=/path/to/nvcc)
endif
target-cc := $(if $(CONFIG_TARGET_SM75),75,$(if $(CONFIG_TARGET_SM80),80,90))
target-virt := compute_$(target-cc)$(if $(CONFIG_TARGET_SM90),a)
override-cc := $(filter-out 0,$(CONFIG_CUDA_ARCH_OVERRIDE))
ifneq ($(override-cc),)
nvcc-codes := $(shell $(NVCC) --list-gpu-code)
ifeq ($(filter sm_$(override-cc),$(nvcc-codes)),)
$(error CONFIG_CUDA_ARCH_OVERRIDE=$(override-cc): this nvcc builds for $(nvcc-codes:sm_%=%) only; change it with 'make menuconfig')
endif
ifneq ($(shell test $(override-cc) -ge $(target-cc) && echo ok),ok)
$(error CONFIG_CUDA_ARCH_OVERRIDE=$(override-cc) is older than the target ($(target-cc)): the target's instructions would not run; change it with 'make menuconfig')
endif
ifeq ($(CONFIG_TARGET_SM90)$(filter-out 90,$(override-cc)),y$(override-cc))
$(error CONFIG_CUDA_ARCH_OVERRIDE=$(override-cc) with the Hopper target: sm_90a code runs on compute capability 9.0 only; use 0 or 90)
endif
target-real := sm_$(override-cc)$(if $(CONFIG_TARGET_SM90),a)
else
target-real := sm_$(target-cc)$(if $(CONFIG_TARGET_SM90),a)
endif
ifeq ($(CONFIG_DP),y)
ifneq ($(shell $(NVCC) -E -x cu /dev/null -include nccl.h >/dev/null 2>&1 && echo ok),ok)
$(error CONFIG_DP needs NCCL, and nvcc finds no nccl.h: install NCCL (Debian: libnccl-dev; NVIDIA's CUDA repositories ship it) or turn CONFIG_DP off with 'make menuconfig')
endif
endif
NVCCFLAGS := -std=c++17 -O3 -lineinfo -gencode arch=$(target-virt),code=[$(target-real),$(target-virt)] \
             -Xcompiler "$(WARN) -Wno-unused-parameter" -Xptxas -warn-spills $(EXTRA_NVCCFLAGS)
LD := $(NVCC) -gencode arch=$(target-virt),code=$(target-real)
LDLIBS := $(LIBS) $(if $(CONFIG_DP),-lnccl) $(if $(CONFIG_HOST_OPENMP),-Xcompiler -fopenmp) \
          $(if $(SANITIZE_FLAGS),-Xcompiler "$(SANITIZE_FLAGS)")
else
LD := $(CC)
endif

# The compile commands, kept in a stamp that every object depends on, so that
# a change of flags (SANITIZE=, EXTRA_WARN=, another compiler) rebuilds. A
# rule, run every time, rewrites it only when the commands change; a file
# written while the makefile is read could hide behind make's cached listing.
FLAGS_STAMP := $(BUILD)/.flags
flags-now := $(CC) $(CPPFLAGS) $(CFLAGS) | $(NVCC) $(NVCCFLAGS)
$(FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(flags-now)' | cmp -s - $@ || printf '%s\n' '$(flags-now)' >$@
# Written by genconfig while the makefile is read: nothing to do here.
$(CONFIG_H): ;

app-objs := $(addprefix $(BUILD)/,$(obj-y))
test-bins := $(addprefix $(O)/tests/bin/,$(tests-y))
tool-bins := $(addprefix $(O)/tools/bin/,$(tools-y))

all: $(O)/app/mnist $(test-bins) $(tool-bins)
# What the tests run, without the benchmark tools (the GPU suite builds dozens of variants).
test-programs: $(O)/app/mnist $(test-bins)

$(O)/app/mnist: $(app-objs)
	@mkdir -p $(@D)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(LD) -o $@ $^ $(LDLIBS)

# Test programs link everything but the app's main.
lib-objs := $(filter-out $(BUILD)/app/%,$(app-objs))
$(O)/tests/bin/%: $(BUILD)/tests/%.o $(lib-objs)
	@mkdir -p $(@D)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(LD) -o $@ $^ $(LDLIBS)

$(O)/tools/bin/%: $(BUILD)/tools/lab/%.o $(lib-objs)
	@mkdir -p $(@D)
	@$(if $(Q),echo '  LD      $@')
	$(Q)$(LD) -o $@ $^ $(LDLIBS) -lcublas

# Each object depends on the configuration symbols its sources name, as Kbuild's do: fixdep rewrites
# the compiler's dependency file, config.h replaced by a file per symbol (tools/make/fixdep.c). config.h
# is order-only: it must exist, and each object is rebuilt by the symbols it reads.
FIXDEP := $(BUILD)/fixdep
$(FIXDEP): tools/make/fixdep.c
	@mkdir -p $(@D)
	@$(if $(Q),echo '  HOSTCC  $<')
	$(Q)$(HOSTCC) -O2 -Wall -Wextra $(EXTRA_WARN) -o $@ $<
fixdep = $(FIXDEP) $(@:.o=.d) $(O)/include/config

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | $(CONFIG_H) $(FIXDEP)
	@mkdir -p $(@D)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
	$(Q)$(fixdep)

# The wgmma wrappers, written out by a script (one asm operand per accumulator).
WGMMA_H := $(if $(CONFIG_GEMM_WGMMA),$(O)/include/generated/sm90_wgmma.h)
$(O)/include/generated/sm90_wgmma.h: tools/make/gen_sm90_wgmma.py
	@mkdir -p $(@D)
	$(Q)$(or $(PYTHON),python3) tools/make/gen_sm90_wgmma.py $@

$(BUILD)/%.o: %.cu $(WGMMA_H) $(FLAGS_STAMP) | $(CONFIG_H) $(FIXDEP)
	@mkdir -p $(@D)
	@$(if $(Q),echo '  NVCC    $<')
	$(Q)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -c -o $@ $<
	$(Q)$(fixdep)

# PTX of one CUDA source, to read the instruction forms: make build/kernels/cuda/gemm/forward.ptx
$(BUILD)/%.ptx: %.cu $(CONFIG_H) $(WGMMA_H)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(CPPFLAGS) $(NVCCFLAGS) -ptx -o $@ $<

-include $(app-objs:.o=.d) $(test-bins:$(O)/tests/bin/%=$(BUILD)/tests/%.d) $(tool-bins:$(O)/tools/bin/%=$(BUILD)/tools/lab/%.d)
.SECONDARY:

endif # build goals
endif # sequential
