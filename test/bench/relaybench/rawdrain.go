package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

type rawResult struct {
	rows    int
	elapsed time.Duration
	// endLSN is the end of the commit that completed the backlog.
	endLSN pglogrepl.LSN
}

// rawDrain streams rawSlot with pgoutput proto v1 and only parses: every
// message through pglogrepl.Parse, every insert's tuple decoded into Go
// strings, a standby status update every second. It stops at the commit
// that completes n inserts. This is the ceiling the relay is compared with.
func rawDrain(ctx context.Context, dbURL string, n int) (rawResult, error) {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return rawResult{}, err
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return rawResult{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	start := time.Now()
	err = pglogrepl.StartReplication(ctx, conn, rawSlot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + publication + "'"},
	})
	if err != nil {
		return rawResult{}, err
	}
	var (
		rows      int
		confirmed pglogrepl.LSN
		nextAck   = time.Now().Add(time.Second)
		values    []string
	)
	ack := func() error {
		nextAck = time.Now().Add(time.Second)
		return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: confirmed, WALFlushPosition: confirmed, WALApplyPosition: confirmed,
		})
	}
	for {
		if time.Now().After(nextAck) {
			if err := ack(); err != nil {
				return rawResult{}, err
			}
		}
		rctx, cancel := context.WithDeadline(ctx, nextAck)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return rawResult{}, err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return rawResult{}, fmt.Errorf("server: %s", m.Message)
		case *pgproto3.CopyData:
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return rawResult{}, err
				}
				if ka.ReplyRequested {
					if err := ack(); err != nil {
						return rawResult{}, err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return rawResult{}, err
				}
				lm, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					return rawResult{}, err
				}
				switch lm := lm.(type) {
				case *pglogrepl.InsertMessage:
					rows++
					values = values[:0]
					for _, col := range lm.Tuple.Columns {
						if col.DataType == pglogrepl.TupleDataTypeText || col.DataType == pglogrepl.TupleDataTypeBinary {
							values = append(values, string(col.Data))
						}
					}
				case *pglogrepl.CommitMessage:
					confirmed = lm.TransactionEndLSN
					if rows >= n {
						elapsed := time.Since(start)
						return rawResult{rows: rows, elapsed: elapsed, endLSN: confirmed}, ack()
					}
				}
			}
		}
	}
}
