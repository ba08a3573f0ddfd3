# Builds the executor and the emitter into a small image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version --version, /metrics (toolexec_build_info) and MCP's serverInfo
# report: docker build --build-arg VERSION=v1.2.3 .; without it, "(devel)"
# and the commit the .git directory in the context names.
ARG VERSION=""
RUN LDFLAGS="-s -w -X github.com/tesserix/toolexec/internal/buildinfo.version=${VERSION}" \
 && CGO_ENABLED=0 go build -trimpath -ldflags="$LDFLAGS" -o /out/executor ./cmd/executor \
 && CGO_ENABLED=0 go build -trimpath -ldflags="$LDFLAGS" -o /out/emitter ./cmd/emitter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/executor /out/emitter /usr/local/bin/
USER nonroot
ENTRYPOINT ["/usr/local/bin/executor"]
