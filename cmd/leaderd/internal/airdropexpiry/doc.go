// Package airdropexpiry is a reference job: it marks airdrops that were not
// claimed by their deadline as expired, in bounded batches, each batch one
// fenced transaction, so no lock is held for long (SQLite's write lock, or
// PostgreSQL's lock on the lease row) and a deposed leader cannot expire
// anything.
//
// The airdrops live in the package's own table (airdropexpiry_airdrops), on
// SQLite or PostgreSQL (see jobdb.FencedStore).
// [Job.Create] and [Job.Claim] are plain writes that any replica may make;
// only the expiry needs leadership. An airdrop can be claimed strictly before
// its deadline; from the deadline on it is due to expire. Both rules are
// checked in single statements against the same clock ([Config.Now]), so an
// airdrop is never both claimed and expired.
package airdropexpiry
