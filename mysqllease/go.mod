module github.com/leaderaware/leaderaware/mysqllease

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/leaderaware/leaderaware v0.0.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/anishathalye/porcupine v1.3.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/leaderaware/leaderaware => ../
