# The two commands of the README. Both install what is missing, configure once, and rebuild only what changed.
PRESET ?= default
BUILD := build/$(PRESET)

.PHONY: run test deps build clean

# make run's recipe: Adam with a cosine schedule and flips (see README, strata-train); EPOCHS=3 is quicker.
EPOCHS ?= 8

run: build
	./$(BUILD)/bin/strata-train --recipe fast --epochs $(EPOCHS)

test: build
	ctest --preset $(PRESET)

deps:
	@scripts/install-deps

$(BUILD)/build.ninja: | deps
	cmake --preset $(PRESET)

build: deps $(BUILD)/build.ninja
	cmake --build --preset $(PRESET)

clean:
	rm -rf build
