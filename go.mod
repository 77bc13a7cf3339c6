module github.com/runtimeguard/runtimeguard

go 1.26.8

require (
	github.com/go-git/go-git/v5 v5.19.3
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
)

require (
	github.com/go-git/gcfg v1.5.1-0.20230307220236-3a3c6141e376 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	gopkg.in/warnings.v0 v0.1.2 // indirect
)
