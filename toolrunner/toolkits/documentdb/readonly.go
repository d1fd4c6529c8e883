package documentdb

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/bson"
)

// Operators refused wherever they appear: they write or run server-side code.
var forbiddenAnywhere = map[string]string{
	"$out":         "writes a collection",
	"$merge":       "writes a collection",
	"$where":       "runs server-side JavaScript",
	"$function":    "runs server-side JavaScript",
	"$accumulator": "runs server-side JavaScript",
}

// Update operators have no place in a query filter or a projection; in a
// pipeline $set, $unset, $push, $addToSet, $min and $max are reads
// (stages and accumulators), so they are checked only in filters.
var updateOperators = map[string]bool{
	"$set": true, "$unset": true, "$setOnInsert": true, "$inc": true, "$mul": true, "$rename": true,
	"$currentDate": true, "$push": true, "$pull": true, "$pullAll": true, "$pop": true, "$addToSet": true,
	"$bit": true, "$min": true, "$max": true,
}

// checkReadOnly walks a document (a filter, a projection, a sort or a
// pipeline stage) and returns an error naming the first operator that
// would write or run code. inFilter also refuses update operators.
func checkReadOnly(v any, inFilter bool) error {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if err := checkKey(e.Key, inFilter); err != nil {
				return err
			}
			if err := checkReadOnly(e.Value, inFilter); err != nil {
				return err
			}
		}
	case bson.M:
		for k, e := range x {
			if err := checkKey(k, inFilter); err != nil {
				return err
			}
			if err := checkReadOnly(e, inFilter); err != nil {
				return err
			}
		}
	case bson.A:
		for _, e := range x {
			if err := checkReadOnly(e, inFilter); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkReadOnly(e, inFilter); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkKey(k string, inFilter bool) error {
	if !strings.HasPrefix(k, "$") {
		return nil
	}
	if why, bad := forbiddenAnywhere[k]; bad {
		return fmt.Errorf("operator %s is not allowed: it %s, and DocumentDbToolkit is read-only", k, why)
	}
	if inFilter && updateOperators[k] {
		return fmt.Errorf("operator %s is an update operator, not allowed in a filter or projection: DocumentDbToolkit is read-only", k)
	}
	return nil
}
