// Package acktrack computes the WAL position a relay may confirm: the end
// LSN of the last transaction of the longest prefix, in commit order, whose
// events Kafka has all acknowledged.
//
// The WAL reader calls Begin when a transaction starts, Add for each event it
// queues, and Commit with the transaction's end LSN when its commit arrives;
// the Kafka writer calls Ack as events are acknowledged, possibly before the
// commit arrived and in any order across transactions. Confirmed
// never passes a transaction that is still open or not fully acknowledged.
package acktrack
