# The two commands of the README. Both install what is missing, configure once, and rebuild only what changed.
PRESET ?= default
BUILD := build/$(PRESET)

.PHONY: run test deps build clean

run: build
	./$(BUILD)/bin/strata-smi

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
