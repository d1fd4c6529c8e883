package ferret

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// SampleDatabase is the database Seed fills.
const SampleDatabase = "shop"

// Seed fills the sample database "shop" (customers, products, orders) at
// uri, unless it already holds customers.
func Seed(ctx context.Context, uri string) error {
	c, err := mongo.Connect(ctx, options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	defer c.Disconnect(ctx)
	db := c.Database(SampleDatabase)
	if n, err := db.Collection("customers").CountDocuments(ctx, bson.D{}); err != nil {
		return fmt.Errorf("sample data: %w", err)
	} else if n > 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(7, 11))
	cities := []string{"Paris", "Oslo", "Lisbon", "Nairobi", "Lima", "Osaka"}
	names := []string{"Ada", "Grace", "Alan", "Katherine", "Edsger", "Barbara", "Donald", "Frances"}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var customers, products, orders []any
	custIDs := make([]primitive.ObjectID, 40)
	for i := range custIDs {
		custIDs[i] = primitive.NewObjectIDFromTimestamp(base.Add(time.Duration(i) * time.Hour))
		doc := bson.D{{Key: "_id", Value: custIDs[i]}, {Key: "name", Value: fmt.Sprintf("%s %d", names[i%len(names)], i)},
			{Key: "email", Value: fmt.Sprintf("customer%d@example.com", i)},
			{Key: "address", Value: bson.D{{Key: "city", Value: cities[i%len(cities)]}, {Key: "zip", Value: fmt.Sprintf("%05d", 1000+i)}}},
			{Key: "vip", Value: i%7 == 0}, {Key: "signed_up", Value: primitive.NewDateTimeFromTime(base.AddDate(0, 0, i))}}
		if i%9 == 0 {
			doc = append(doc, bson.E{Key: "phone", Value: nil})
		}
		customers = append(customers, doc)
	}
	skus := make([]string, 15)
	for i := range skus {
		skus[i] = fmt.Sprintf("SKU-%03d", i)
		products = append(products, bson.D{{Key: "_id", Value: skus[i]}, {Key: "title", Value: fmt.Sprintf("Product %d", i)},
			{Key: "price", Value: float64(5+i*3) + 0.99}, {Key: "tags", Value: bson.A{[]string{"home", "garden", "office"}[i%3], "sale"}},
			{Key: "stock", Value: int32(10 * (i % 5))}})
	}
	statuses := []string{"paid", "paid", "shipped", "pending", "refunded"}
	for i := 0; i < 120; i++ {
		var items bson.A
		var total float64
		for j := 0; j < 1+rng.IntN(3); j++ {
			k := rng.IntN(len(skus))
			qty := int32(1 + rng.IntN(4))
			price := float64(5+k*3) + 0.99
			items = append(items, bson.D{{Key: "sku", Value: skus[k]}, {Key: "qty", Value: qty}, {Key: "price", Value: price}})
			total += price * float64(qty)
		}
		orders = append(orders, bson.D{{Key: "_id", Value: primitive.NewObjectIDFromTimestamp(base.Add(time.Duration(i) * 7 * time.Hour))},
			{Key: "customer_id", Value: custIDs[rng.IntN(len(custIDs))]}, {Key: "status", Value: statuses[i%len(statuses)]},
			{Key: "items", Value: items}, {Key: "total", Value: float64(int(total*100)) / 100},
			{Key: "created_at", Value: primitive.NewDateTimeFromTime(base.Add(time.Duration(i) * 7 * time.Hour))}})
	}
	for name, docs := range map[string][]any{"customers": customers, "products": products, "orders": orders} {
		if _, err := db.Collection(name).InsertMany(ctx, docs); err != nil {
			return fmt.Errorf("sample %s: %w", name, err)
		}
	}
	return nil
}
