package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"herd/agent"
	"herd/models"
)

// costs is what usage cost, per currency; models without a price add
// nothing (docs/DESIGN.md §6).
type costs map[string]float64

// prices are the configured models' prices, by herd model name.
func (s *Server) prices() map[string]agent.ModelPrice {
	out := map[string]agent.ModelPrice{}
	for _, m := range s.rt.Models() {
		if m.Price != nil {
			out[m.Name] = *m.Price
		}
	}
	return out
}

// costOf is what byModel's tokens cost at prices; nil when no model of
// it has one.
func costOf(prices map[string]agent.ModelPrice, byModel map[string]models.UsageTotals) costs {
	var c costs
	for name, t := range byModel {
		p, ok := prices[name]
		if !ok {
			continue
		}
		if c == nil {
			c = costs{}
		}
		c[p.Currency] += p.Cost(t.InputTokens, t.OutputTokens)
	}
	return c
}

// String writes the costs as "1.24 USD", currencies apart and in order;
// a cost below a cent keeps four decimals, so that it does not read as
// nothing.
func (c costs) String() string {
	parts := make([]string, 0, len(c))
	for _, cur := range slices.Sorted(maps.Keys(c)) {
		v := c[cur]
		if v > 0 && v < 0.01 {
			parts = append(parts, fmt.Sprintf("%.4f %s", v, cur))
		} else {
			parts = append(parts, fmt.Sprintf("%.2f %s", v, cur))
		}
	}
	return strings.Join(parts, " + ")
}
