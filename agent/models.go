package agent

import "fmt"

// BuildModels constructs each configured model's provider, in order (the
// first is the default).
func BuildModels(cfgs []ModelConfig) ([]*Model, error) {
	out := make([]*Model, 0, len(cfgs))
	for i, c := range cfgs {
		var p Provider
		switch c.Provider {
		case "demo":
			p = NewDemo(c)
		case "openai":
			o, err := NewOpenAI(c)
			if err != nil {
				return nil, fmt.Errorf("models.%d (%s): %w", i, c.Name, err)
			}
			p = o
		default:
			return nil, fmt.Errorf("models.%d.provider: unknown provider %q", i, c.Provider)
		}
		out = append(out, &Model{Config: c, Provider: p})
	}
	return out, nil
}
