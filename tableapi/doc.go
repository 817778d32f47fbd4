// Package tableapi is a client of the Azure Table REST protocol, for the
// tools that speak it to any endpoint (pgtables, Azurite, Azure): the load
// tool and the copy command. It signs with Shared Key Lite and sends
// requests over its own lean keep-alive HTTP/1.1 connections, so that a load
// test spends its cores on the server it measures rather than on its
// client.
package tableapi
