module github.com/gpu-hold/gpu-hold

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/creack/pty v1.1.24
	github.com/mattn/go-isatty v0.0.20
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.73.1
	github.com/rs/zerolog v1.35.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
