package integration

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, _ := e.newTable()
	ent := aztables.EDMEntity{
		Entity: aztables.Entity{PartitionKey: "p1", RowKey: "r1"},
		Properties: map[string]any{
			"Age":  int32(23),
			"Big":  aztables.EDMInt64(-9223372036854775808),
			"Name": "Zoë",
			"Dbl":  5.5,
		},
	}
	b, _ := json.Marshal(ent)
	if _, err := c.AddEntity(ctx, b, nil); err != nil {
		t.Fatalf("add: %v", err)
	}
	got, err := c.GetEntity(ctx, "p1", "r1", nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	var back aztables.EDMEntity
	if err := json.Unmarshal(got.Value, &back); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", got.Value)
	if back.Properties["Big"] != aztables.EDMInt64(-9223372036854775808) || back.Properties["Dbl"] != 5.5 || back.Properties["Age"] != int32(23) {
		t.Fatalf("got %#v", back.Properties)
	}
	pager := c.NewListEntitiesPager(nil)
	n := 0
	for pager.More() {
		p, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Entities)
	}
	if n != 1 {
		t.Fatalf("listed %d", n)
	}
	if _, err := c.DeleteEntity(ctx, "p1", "r1", nil); err != nil {
		t.Fatal(err)
	}
}
