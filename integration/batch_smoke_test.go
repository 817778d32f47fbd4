package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestBatchSmoke(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, _ := e.newTable()
	var actions []aztables.TransactionAction
	for i := 0; i < 5; i++ {
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
			Entity: []byte(fmt.Sprintf(`{"PartitionKey":"p'1","RowKey":"r%d","V":%d}`, i, i))})
	}
	resp, err := c.SubmitTransaction(ctx, actions, nil)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	t.Logf("response: %+v", resp)
	actions = []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeUpdateMerge, Entity: []byte(`{"PartitionKey":"p'1","RowKey":"r0","W":1}`)},
		{ActionType: aztables.TransactionTypeDelete, Entity: []byte(`{"PartitionKey":"p'1","RowKey":"r1"}`)},
		{ActionType: aztables.TransactionTypeAdd, Entity: []byte(`{"PartitionKey":"p'1","RowKey":"r2"}`)},
	}
	_, err = c.SubmitTransaction(ctx, actions, nil)
	t.Logf("expected failure: %v", err)
	if err == nil {
		t.Fatal("duplicate insert in batch succeeded")
	}
	if _, err := c.GetEntity(ctx, "p'1", "r1", nil); err != nil {
		t.Fatalf("r1 deleted by failed batch: %v", err)
	}
}
