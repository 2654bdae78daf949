// Package pricerefresh is a reference job: it fetches prices from a
// [PriceSource] every interval and stores them, with the time they were
// fetched and the fencing token of the term that wrote them, in a table of
// its own, on SQLite or PostgreSQL (see jobdb.FencedStore).
//
// The job knows nothing of leadership. Decorate it (decorator.Decorate) so
// that one replica runs it; every write goes through the store's fenced
// transaction, so a replica that has lost its lease without noticing yet
// cannot overwrite the new leader's prices.
//
// Sources: [HTTPSource] reads a JSON document from a URL; [SimulatedSource]
// is a deterministic random walk for demos and tests.
package pricerefresh
