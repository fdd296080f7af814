package render

// CacheBytes is the HTML m's cache holds, for the external tests.
func CacheBytes(m *Markdown) int { return m.cache.bytes }

// CacheLen is the number of texts m's cache holds.
func CacheLen(m *Markdown) int { return m.cache.len() }
