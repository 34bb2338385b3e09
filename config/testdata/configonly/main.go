// Command configonly is a program that imports config alone, as one that
// locks with single over go-redis does: TestConfigAloneLinksNeitherRedigoNorOTel
// lists what it compiles, and runs it to read the errors of the settings
// that need more.
package main

import (
	"fmt"
	"os"

	"github.com/locksmith-go/lock/config"
)

func main() {
	for _, u := range os.Args[1:] {
		_, err := config.ParseURL(u)
		fmt.Println(err)
	}
}
