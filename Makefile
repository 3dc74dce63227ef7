# The two commands of the README. Both install what is missing, configure once, and rebuild only what changed.
# make test builds everything of PRESET (default: the default preset) and runs ctest; make run builds only what it
# runs, in the run preset's build/run: libstrata, strata-train and the GPU plugins of the GPUs present.
PRESET ?= default
BUILD := build/$(PRESET)
# make run's preset; PRESET=... given (make run PRESET=cpu) runs that preset's build instead.
ifeq ($(origin PRESET),file)
RUN_PRESET := run
else
RUN_PRESET := $(PRESET)
endif
RUN_BUILD := build/$(RUN_PRESET)

# A GPU plugin for make run where a GPU of its vendor is present (the NVIDIA driver's /dev/nvidia0 or a working
# nvidia-smi; AMD's /dev/kfd), or where STRATA_WITH_CUDA / STRATA_WITH_HIP (ON or OFF, from the environment or the
# command line) say so. The choice is passed to CMake, and a change of it reconfigures build/run.
STRATA_WITH_CUDA ?= $(if $(or $(wildcard /dev/nvidia0),$(shell nvidia-smi -L >/dev/null 2>&1 && echo y)),ON,OFF)
STRATA_WITH_HIP ?= $(if $(wildcard /dev/kfd),ON,OFF)
RUN_CMAKE_ARGS = -DSTRATA_WITH_CUDA=$(STRATA_WITH_CUDA) -DSTRATA_WITH_HIP=$(STRATA_WITH_HIP)

.PHONY: run shakespeare test deps deps-run build build-run clean FORCE

# make run's recipe: Adam with a cosine schedule and flips (see README, strata-train); EPOCHS=3 is quicker.
EPOCHS ?= 8

run: build-run
	./$(RUN_BUILD)/bin/strata-train --recipe fast --epochs $(EPOCHS)

# The second job: nanoGPT's character-level GPT on Shakespeare (README, "strata-train --task shakespeare"), its gpu
# recipe where make run builds the CUDA plugin, its cpu recipe (2000 iterations) elsewhere; ITERS=200 is quicker.
SHAKESPEARE_RECIPE ?= $(if $(filter ON,$(STRATA_WITH_CUDA)),gpu,cpu)

shakespeare: build-run
	scripts/fetch-shakespeare
	./$(RUN_BUILD)/bin/strata-train --task shakespeare --recipe $(SHAKESPEARE_RECIPE) $(if $(ITERS),--iters $(ITERS)) \
	  --sample 500

test: build
	ctest --preset $(PRESET)

deps:
	@scripts/install-deps

deps-run:
	@scripts/install-deps $(strip --run $(if $(filter ON,$(STRATA_WITH_HIP)),--hip))

$(BUILD)/build.ninja: | deps
	cmake --preset $(PRESET)

build: deps $(BUILD)/build.ninja
	cmake --build --preset $(PRESET)

ifeq ($(RUN_PRESET),run)
# The plugin choice, rewritten only when it changes, so that build/run is configured again only then.
$(RUN_BUILD)/make-run-args: FORCE
	@mkdir -p $(RUN_BUILD)
	@echo '$(RUN_CMAKE_ARGS)' | cmp -s - $@ || echo '$(RUN_CMAKE_ARGS)' > $@

# touch: CMake leaves build.ninja alone when its content did not change.
$(RUN_BUILD)/build.ninja: $(RUN_BUILD)/make-run-args | deps-run
	cmake --preset run $(RUN_CMAKE_ARGS)
	touch $@

build-run: deps-run $(RUN_BUILD)/build.ninja
	cmake --build --preset run
else
build-run: build
endif

clean:
	rm -rf build
