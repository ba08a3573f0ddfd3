# Builds the executor and the emitter into a small image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# --version, /metrics (toolexec_build_info) and MCP's serverInfo report the
# release the source names, and the commit when the context holds .git.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/executor ./cmd/executor \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/emitter ./cmd/emitter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/executor /out/emitter /usr/local/bin/
USER nonroot
ENTRYPOINT ["/usr/local/bin/executor"]
