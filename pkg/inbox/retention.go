package inbox

import (
	"context"
	"time"
)

// purge deletes this consumer's COMPLETED rows older than olderThan (see
// Store.Purge): the consumer loop's retention (inboxkafka.Config.Retention).
func (in *core) purge(ctx context.Context, olderThan time.Duration) (int64, error) {
	n, err := (&Store{table: in.table}).purge(ctx, in.admin, PurgeParams{Consumer: in.cfg.Consumer, OlderThan: olderThan})
	if n > 0 {
		in.log.Info("inbox: purged", "rows", n, "older_than", olderThan.String())
	}
	return n, err
}
