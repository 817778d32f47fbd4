package store

import (
	"context"
	"sync"
	"time"

	"github.com/pgtables/pgtables/odata/filter"
)

// DefaultIndexCacheTTL is Options.IndexCacheTTL's default.
const DefaultIndexCacheTTL = time.Second

// indexCache keeps each table's id and ready property indexes for a short
// while, so that a page whose filter compares properties does not read
// the catalog first. A stale entry cannot change a page's results:
//
//   - an index it names that is gone only adds a condition the filter
//     implies (filter.Index), which a query without the index evaluates
//     as any other;
//   - an index it lacks is only not used, until the entry expires;
//   - a table id of a table deleted since (and created again under the
//     same name) contradicts the statement's own lookup of the live
//     table, so the page comes back empty, and queryEntities reads the
//     catalog again before it answers an empty page (freshIndexes).
//
// Builds and drops of this store clear it at once; other stores on the
// same database see them within the TTL.
type indexCache struct {
	mu      sync.Mutex
	entries map[indexCacheKey]indexCacheEntry
}

type indexCacheKey struct{ account, table string }

type indexCacheEntry struct {
	tableID int64
	indexes []filter.Index
	expires time.Time
}

// clear forgets every entry: index builds and drops are rare, and the
// next page of each table reads the catalog again.
func (c *indexCache) clear() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}

// forget drops the entry of a table.
func (c *indexCache) forget(account, table string) {
	c.mu.Lock()
	delete(c.entries, indexCacheKey{account, tableKey(table)})
	c.mu.Unlock()
}

// cachedIndexes is usableIndexes through the cache; cached tells the
// answer came from it.
func (s *Store) cachedIndexes(ctx context.Context, account, table string) (tableID int64, ixs []filter.Index, cached bool, err error) {
	if s.opts.IndexCacheTTL < 0 {
		tableID, ixs, err = s.usableIndexes(ctx, account, table)
		return tableID, ixs, false, err
	}
	key := indexCacheKey{account, tableKey(table)}
	now := s.now()
	s.indexCache.mu.Lock()
	e, ok := s.indexCache.entries[key]
	s.indexCache.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.tableID, e.indexes, true, nil
	}
	tableID, ixs, err = s.usableIndexes(ctx, account, table)
	if err != nil {
		return 0, nil, false, err
	}
	s.indexCache.mu.Lock()
	if s.indexCache.entries == nil {
		s.indexCache.entries = make(map[indexCacheKey]indexCacheEntry)
	}
	s.indexCache.entries[key] = indexCacheEntry{tableID: tableID, indexes: ixs, expires: now.Add(s.opts.IndexCacheTTL)}
	s.indexCache.mu.Unlock()
	return tableID, ixs, false, nil
}

// freshIndexes drops the cached entry of a table and reads it again.
func (s *Store) freshIndexes(ctx context.Context, account, table string) (int64, []filter.Index, error) {
	s.indexCache.forget(account, table)
	tableID, ixs, _, err := s.cachedIndexes(ctx, account, table)
	return tableID, ixs, err
}
